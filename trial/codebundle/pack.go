package codebundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Default caps. A trainer's code is kilobytes to a few megabytes; data and checkpoints belong
// in .rbignore (or a store), not in every run's upload.
const (
	DefaultMaxBytes = 100 << 20 // what Pack sends at most, in file bytes
	DefaultMaxFiles = 20000
	// MediaType is the bundle's content type on the wire.
	MediaType = "application/gzip"
	// manifestHeader starts the text whose sha256 is a bundle's ID; a new format gets a new one.
	manifestHeader = "rubberband-code-v1\n"
)

// Limits bound what Pack sends and Unpack accepts.
type Limits struct {
	MaxBytes int64 // the files' bytes together (0: DefaultMaxBytes)
	MaxFiles int   // (0: DefaultMaxFiles)
}

func (l Limits) orDefault() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// File is one file of a bundle.
type File struct {
	Path   string // slash-separated, relative to the root
	Exec   bool   // any execute bit: unpacked 0755, else 0644
	Size   int64
	SHA256 string // of its bytes, hex
}

// Manifest is what a bundle holds: its files in path order, and its ID.
type Manifest struct {
	Dir     string // the folder it was made from (Scan), or unpacked into (Unpack)
	Files   []File
	Bytes   int64    // the files' bytes together
	Skipped []string // links Scan did not follow, relative paths
	SHA256  string   // the bundle's ID: ID(Files)
}

// ID is the sha256 of a bundle's manifest text: the header line, then one line per file in
// byte order of path, "MODE SHA256 PATH\n" with MODE 755 or 644. Both packers compute it so.
func ID(files []File) string {
	h := sha256.New()
	io.WriteString(h, manifestHeader)
	for _, f := range files {
		mode := "644"
		if f.Exec {
			mode = "755"
		}
		fmt.Fprintf(h, "%s %s %s\n", mode, f.SHA256, f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidID says whether id is a bundle ID (64 lowercase hex digits): IDs name files and keys.
func ValidID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// TooLargeError is a folder over Pack's caps: what it holds and its largest files.
type TooLargeError struct {
	Dir     string
	Bytes   int64
	Files   int
	Limits  Limits
	Largest []File // at most five, largest first
}

func (e *TooLargeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trainer.workdir %s is too large to send with the run: %d files, %s (at most %d files, %s)", e.Dir, e.Files, HumanSize(e.Bytes), e.Limits.MaxFiles, HumanSize(e.Limits.MaxBytes))
	if len(e.Largest) > 0 {
		b.WriteString("; the largest: ")
		for i, f := range e.Largest {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%s)", f.Path, HumanSize(f.Size))
		}
	}
	fmt.Fprintf(&b, ". List what the trainer does not need (data, checkpoints, outputs) in %s, one pattern a line as in .gitignore (say `data/` or `*.pt`), or set trainer.workdir to a smaller folder",
		filepath.Join(e.Dir, IgnoreFiles[1]))
	return b.String()
}

// HumanSize is n bytes as people read it (12.3 MiB).
func HumanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Scan lists and hashes what Pack would send of dir: every regular file its ignore files do not
// leave out, within lim (a *TooLargeError past it). Links are skipped (Manifest.Skipped), and so
// are the folders in exclude (absolute paths: a run's own state directory, when --state put it
// inside the trainer's folder).
func Scan(dir string, lim Limits, exclude ...string) (*Manifest, error) {
	lim = lim.orDefault()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("trainer.workdir: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("trainer.workdir %s is not a folder", abs)
	}
	var ig Ignore
	for _, name := range IgnoreFiles {
		b, err := os.ReadFile(filepath.Join(abs, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", name, err)
		case len(b) > 1<<20:
			return nil, fmt.Errorf("%s is %d bytes: an ignore file of over 1 MiB is not one", filepath.Join(abs, name), len(b))
		default:
			ig.ParseIgnore(b)
		}
	}
	m := &Manifest{Dir: abs}
	walked := 0
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == abs {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, abs+string(filepath.Separator)))
		if ig.Ignored(rel, d.IsDir()) || d.IsDir() && slices.Contains(exclude, p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if walked++; walked > 10*lim.MaxFiles { // a folder of millions of entries: stop walking it
			return &TooLargeError{Dir: abs, Bytes: m.Bytes, Files: len(m.Files), Limits: lim}
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			m.Skipped = append(m.Skipped, rel)
			return nil
		case !d.Type().IsRegular():
			return nil // sockets, FIFOs: nothing to send
		}
		if !validName(rel) {
			return fmt.Errorf("%s: a file name with a newline or control character cannot be sent", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m.Files = append(m.Files, File{Path: rel, Exec: fi.Mode()&0o111 != 0, Size: fi.Size()})
		m.Bytes += fi.Size()
		return nil
	})
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.Largest = largest(m.Files)
		}
		return nil, err
	}
	if m.Bytes > lim.MaxBytes || len(m.Files) > lim.MaxFiles {
		return nil, &TooLargeError{Dir: abs, Bytes: m.Bytes, Files: len(m.Files), Limits: lim, Largest: largest(m.Files)}
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	for i := range m.Files {
		f := &m.Files[i]
		sum, n, err := hashFile(filepath.Join(abs, filepath.FromSlash(f.Path)), nil)
		if err != nil {
			return nil, err
		}
		f.SHA256, f.Size = sum, n
	}
	m.SHA256 = ID(m.Files)
	return m, nil
}

func largest(files []File) []File {
	out := append([]File(nil), files...)
	sort.Slice(out, func(i, j int) bool { return out[i].Size > out[j].Size })
	return out[:min(5, len(out))]
}

// validName refuses names a manifest line or a tar header could not carry unambiguously.
func validName(rel string) bool {
	for _, c := range rel {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// hashFile returns the sha256 and size of the file at p, copying its bytes to w when w is set.
func hashFile(p string, w io.Writer) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// epoch is every entry's time: a bundle's bytes depend on its files' contents alone.
var epoch = time.Unix(0, 0).UTC()

// Write writes the tar.gz of m's files, read again from m.Dir, in manifest order with fixed
// times, owners and modes: the same folder gives the same bytes. A file that changed since Scan
// is an error (its ID would lie).
func (m *Manifest) Write(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, f := range m.Files {
		mode := int64(0o644)
		if f.Exec {
			mode = 0o755
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Size: f.Size, Mode: mode, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("pack %s: %w", f.Path, err)
		}
		lw := &limitedWriter{w: tw, left: f.Size}
		sum, n, err := hashFile(filepath.Join(m.Dir, filepath.FromSlash(f.Path)), lw)
		if err != nil {
			return fmt.Errorf("pack %s: %w", f.Path, err)
		}
		if n != f.Size || sum != f.SHA256 {
			return fmt.Errorf("pack %s: it changed while it was packed; run again", f.Path)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// limitedWriter refuses bytes past left: a file that grew since Scan must not break the tar.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errors.New("it grew while it was packed; run again")
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// Pack is Scan then Write: dir's bundle written to w, and its manifest.
func Pack(dir string, lim Limits, w io.Writer) (*Manifest, error) {
	m, err := Scan(dir, lim)
	if err != nil {
		return nil, err
	}
	return m, m.Write(w)
}

// cleanName is a tar entry's name as a relative slash path inside the root, or "" when it is
// not one (absolute, "..", empty, a drive or backslash trick, control characters).
func cleanName(name string) string {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || !validName(name) {
		return ""
	}
	c := path.Clean(name)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return ""
	}
	for _, seg := range strings.Split(c, "/") {
		if seg == ".." {
			return ""
		}
	}
	return c
}
