package starter

import "path/filepath"

// Init writes the starting spec out (`rubberband init`) for the script in out's folder, as Write
// does: o's File is out's name, and its Name the folder's unless given.
func Init(o Options, out string, force bool) (Options, error) {
	dir, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return o, err
	}
	o.File = filepath.Base(out)
	if o.Name == "" {
		o.Name = filepath.Base(dir)
	}
	return Write(o, dir, out, force)
}
