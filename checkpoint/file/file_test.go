package file

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) checkpoint.Store {
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Corrupt: func(t *testing.T, s checkpoint.Store, key string) {
			p := filepath.Join(s.(*Store).Root, filepath.FromSlash(key))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// A Put that dies before its manifest is renamed leaves no object behind.
func TestUncommittedPutIsInvisible(t *testing.T) {
	s, _ := New(t.TempDir())
	os.MkdirAll(filepath.Join(s.Root, "trials", "t"), 0o755)
	os.WriteFile(filepath.Join(s.Root, "trials", "t", "1"), []byte("half"), 0o644)
	if list, err := s.List(t.Context(), "trials/"); err != nil || len(list) != 0 {
		t.Fatalf("uncommitted data listed: %v %v", list, err)
	}
}

// The store is its owner's alone (the umask aside): its directories are 0700 and its objects
// and manifests 0600, since checkpoints hold the model and what it learnt from.
func TestStoreIsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "checkpoints")
	s, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "trials/t1/000001", strings.NewReader("weights")); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s is %#o, want %#o", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
