package safefile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read reads the regular file at path (a symbolic link to one is fine) of at most limit bytes;
// what names the kind of file in errors ("a plan file"). It refuses anything else by name
// before opening it.
func Read(path string, limit int64, what string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, Kind(st.Mode()))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, above the limit of %d bytes%s for %s", path, st.Size(), limit, size(limit), what)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte over the limit tells a file that grew since the stat.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew past the limit of %d bytes%s for %s while it was read", path, limit, size(limit), what)
	}
	return data, nil
}

// Kind names what a file that is not a regular one is.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "a special file"
	}
}

// size says a limit in MiB too, when it is a whole number of them.
func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf(" (%d MiB)", n>>20)
	}
	return ""
}
