package codebundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(m *Manifest) string {
	var out []string
	for _, f := range m.Files {
		out = append(out, f.Path)
	}
	return strings.Join(out, " ")
}

func TestIgnoreRules(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"train.py": "print(1)", "lib/model.py": "m", "lib/cache.pyc": "c", "data/big.bin": "d",
		"keep.log": "k", "run.log": "r", "sub/build/x.o": "o", "build/top.o": "o", "notes/a.md": "a",
		".rubberband/run/journal.jsonl": "j", ".git/HEAD": "h", "sub/.rubberband/x": "x",
		"docs/deep/a.tmp": "t", "#hash.txt": "h", "ckpt/model.pt": "p",
		".gitignore": "# comments and blanks are skipped\n\n*.pyc\ndata/\n*.log\n!keep.log\n/build/\n\\#hash.txt\ndocs/**/*.tmp\n",
		".rbignore":  "ckpt\nnotes/\n",
	})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	m, err := Scan(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := ".gitignore .rbignore keep.log lib/model.py sub/build/x.o train.py"
	if got := paths(m); got != want {
		t.Errorf("packed %q, want %q", got, want)
	}
	if len(m.Skipped) != 1 || m.Skipped[0] != "link" {
		t.Errorf("skipped %v, want the link", m.Skipped)
	}
}

func TestRoundTripIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"train.py": "print('hi')\n", "pkg/util.py": "x = 1\n", "run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	m1, err := Pack(dir, Limits{}, &a)
	if err != nil {
		t.Fatal(err)
	}
	// Times change, contents do not: the same bytes and ID.
	if err := os.Chtimes(filepath.Join(dir, "train.py"), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	m2, err := Pack(dir, Limits{}, &b)
	if err != nil {
		t.Fatal(err)
	}
	if m1.SHA256 != m2.SHA256 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two packs of one folder differ: %s vs %s", m1.SHA256, m2.SHA256)
	}
	out := t.TempDir()
	got, err := UnpackAs(bytes.NewReader(a.Bytes()), out, m1.SHA256, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 != m1.SHA256 {
		t.Fatalf("unpacked ID %s, packed %s", got.SHA256, m1.SHA256)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "pkg", "util.py")); string(b) != "x = 1\n" {
		t.Errorf("pkg/util.py holds %q", b)
	}
	if st, _ := os.Stat(filepath.Join(out, "run.sh")); st.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode %v, want 0755", st.Mode().Perm())
	}
	// A changed file is a new ID.
	write(t, dir, map[string]string{"train.py": "print('bye')\n"})
	m3, err := Scan(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if m3.SHA256 == m1.SHA256 {
		t.Error("a changed file kept the bundle's ID")
	}
}

// TestIDIsTheManifestHash pins the ID's definition: the Python client computes the same text.
func TestIDIsTheManifestHash(t *testing.T) {
	got := ID([]File{{Path: "a.py", SHA256: strings.Repeat("0", 64)}, {Path: "b/run.sh", Exec: true, SHA256: strings.Repeat("1", 64)}})
	// sha256 of "rubberband-code-v1\n644 000…0 a.py\n755 111…1 b/run.sh\n"
	if want := "693a3ccee0f42d0bae99d71c262b96276e0c3ffeeb23bcfc18820a19852a6593"; got != want {
		t.Fatalf("ID %s, want %s", got, want)
	}
}

func TestTooLargeNamesTheLargestFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"train.py": "x", "data/weights.bin": strings.Repeat("w", 4000), "small.txt": "s"})
	_, err := Scan(dir, Limits{MaxBytes: 1000})
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("err %v, want a TooLargeError", err)
	}
	for _, want := range []string{"data/weights.bin (3.9 KiB)", ".rbignore", "trainer.workdir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, err := Scan(dir, Limits{MaxFiles: 2}); !errors.As(err, &tl) {
		t.Errorf("3 files under a cap of 2: %v", err)
	}
}

type entry struct {
	name string
	typ  byte
	body string
	link string
	size int64 // when set, the header's size instead of the body's
}

func tarGz(t testing.TB, entries []entry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if e.size != 0 {
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Flush()
	zw.Close()
	return buf.Bytes()
}

func TestUnpackRefusesHostileBundles(t *testing.T) {
	many := make([]entry, 5)
	for i := range many {
		many[i] = entry{name: strings.Repeat("f", i+1), typ: tar.TypeReg, body: "x"}
	}
	cases := []struct {
		name    string
		entries []entry
		lim     Limits
		want    string
	}{
		{"absolute path", []entry{{name: "/etc/cron.d/x", typ: tar.TypeReg, body: "x"}}, Limits{}, "not a relative path"},
		{"dot dot", []entry{{name: "../escape.py", typ: tar.TypeReg, body: "x"}}, Limits{}, "not a relative path"},
		{"dot dot inside", []entry{{name: "a/../../escape.py", typ: tar.TypeReg, body: "x"}}, Limits{}, "not a relative path"},
		{"symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "/etc"}}, Limits{}, "links and devices"},
		{"link then write through it", []entry{{name: "d", typ: tar.TypeSymlink, link: ".."}, {name: "d/x", typ: tar.TypeReg, body: "x"}}, Limits{}, "links and devices"},
		{"hard link", []entry{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}, Limits{}, "links and devices"},
		{"device", []entry{{name: "null", typ: tar.TypeChar}}, Limits{}, "links and devices"},
		{"duplicate", []entry{{name: "a", typ: tar.TypeReg, body: "1"}, {name: "./a", typ: tar.TypeReg, body: "2"}}, Limits{}, "twice"},
		{"too many files", many, Limits{MaxFiles: 4}, "more than 4 files"},
		{"too many folders", []entry{{name: "a/", typ: tar.TypeDir}, {name: "b/", typ: tar.TypeDir}, {name: "c/", typ: tar.TypeDir}}, Limits{MaxFiles: 1}, "more than 2 entries"},
		{"too many bytes", []entry{{name: "big", typ: tar.TypeReg, body: strings.Repeat("b", 2000)}}, Limits{MaxBytes: 1000}, "more than"},
		{"control character", []entry{{name: "a\nb", typ: tar.TypeReg, body: "x"}}, Limits{}, "not a relative path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "code")
			_, err := Unpack(bytes.NewReader(tarGz(t, c.entries)), dst, c.lim)
			if !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrBadBundle saying %q", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(parent, "escape.py")); err == nil {
				t.Error("an entry was written outside the folder")
			}
		})
	}
	t.Run("not gzip", func(t *testing.T) {
		if _, err := Unpack(strings.NewReader("plain text"), t.TempDir(), Limits{}); !errors.Is(err, ErrBadBundle) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("another ID", func(t *testing.T) {
		b := tarGz(t, []entry{{name: "a.py", typ: tar.TypeReg, body: "x"}})
		if _, err := UnpackAs(bytes.NewReader(b), t.TempDir(), strings.Repeat("a", 64), Limits{}); !errors.Is(err, ErrBadBundle) {
			t.Fatalf("err %v", err)
		}
	})
}

func FuzzUnpack(f *testing.F) {
	f.Add(tarGz(f, []entry{{name: "a.py", typ: tar.TypeReg, body: "x"}, {name: "d/", typ: tar.TypeDir}, {name: "d/b", typ: tar.TypeReg, body: "y"}}))
	f.Add(tarGz(f, []entry{{name: "../x", typ: tar.TypeReg, body: "x"}}))
	f.Add(tarGz(f, []entry{{name: "l", typ: tar.TypeSymlink, link: "/"}, {name: "l/x", typ: tar.TypeReg, body: "x"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "code")
		m, err := Unpack(bytes.NewReader(data), dst, Limits{MaxBytes: 1 << 16, MaxFiles: 64})
		// Nothing lands beside dst, whatever the bundle.
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.Name() != "code" {
				t.Fatalf("the bundle wrote %s outside its folder", e.Name())
			}
		}
		if err != nil {
			return
		}
		if m.Bytes > 1<<16 || len(m.Files) > 64 {
			t.Fatalf("past the caps: %d bytes, %d files", m.Bytes, len(m.Files))
		}
		// What was unpacked hashes, packed again, to the ID Unpack computed.
		again, err := Scan(dst, Limits{MaxBytes: 1 << 16, MaxFiles: 64})
		if err != nil {
			t.Fatal(err)
		}
		if again.SHA256 != m.SHA256 {
			// Ignore files inside the bundle leave files out when scanned again.
			for _, f := range m.Files {
				if f.Path == ".gitignore" || f.Path == ".rbignore" || strings.Contains("/"+f.Path, "/.git") || strings.Contains("/"+f.Path, "/.rubberband") {
					return
				}
			}
			t.Fatalf("scan after unpack %s, unpack %s", again.SHA256, m.SHA256)
		}
	})
}

// A run's state directory inside the trainer's folder (run --state DIR/state) is not code.
func TestScanLeavesOutExcludedFolders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"train.py": "x", "state/journal.jsonl": "j", "states/keep.py": "k"})
	m, err := Scan(dir, Limits{}, filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(m); got != "states/keep.py train.py" {
		t.Errorf("packed %q", got)
	}
}

func TestCachedUnpacksOncePerID(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"train.py": "print(1)\n"})
	var buf bytes.Buffer
	m, err := Pack(dir, Limits{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	opens := 0
	open := func() (io.ReadCloser, error) { opens++; return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }
	for range 2 {
		got, err := Cached(cache, m.SHA256, Limits{}, open)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(got, "train.py")); string(b) != "print(1)\n" {
			t.Fatalf("cached train.py holds %q", b)
		}
	}
	if opens != 1 {
		t.Errorf("the bundle was fetched %d times, want once", opens)
	}
	if _, err := Cached(cache, "../../etc", Limits{}, open); !errors.Is(err, ErrBadBundle) {
		t.Errorf("a hostile ID: %v", err)
	}
}
