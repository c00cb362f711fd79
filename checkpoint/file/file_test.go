package file

import (
	"os"
	"path/filepath"
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
