package starter

import (
	"fmt"
	"path/filepath"
)

// Init writes the starting spec out (`rubberband init`) for the script in out's folder, as Write
// does: o's File is out's name, and its Name the folder's unless given. With o.Script (`init
// SCRIPT`) the spec goes beside that script (out "": DefaultFile there) and runs it. It returns
// the options written with and the spec's path.
func Init(o Options, out string, force bool) (Options, string, error) {
	if o.Script != "" && len(o.Command) == 0 { // the spec goes beside the script it names
		if out == "" {
			out = filepath.Join(filepath.Dir(o.Script), DefaultFile)
		} else if a, b := absDir(out), absDir(o.Script); a != b {
			return o, out, &InputError{fmt.Errorf("the spec goes beside its script, which it runs from its own folder: %s is in %s, --out in %s", o.Script, b, a)}
		}
		o.Script = filepath.Base(o.Script)
	}
	dir, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return o, out, err
	}
	o.File = filepath.Base(out)
	if o.Name == "" {
		o.Name = filepath.Base(dir)
	}
	o, err = Write(o, dir, out, force)
	return o, out, err
}

// absDir is the absolute folder of path (the folder as given when that cannot be known).
func absDir(path string) string {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return filepath.Dir(path)
	}
	return dir
}
