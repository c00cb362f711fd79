package starter

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
)

// init names the experiment after the script's folder unless told, and the spec file out.
func TestInitNamesAfterTheFolder(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mnist")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "exp.yaml")
	o, err := Init(Options{Type: DefaultType, Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)}, out, false)
	if err != nil || o.Name != "mnist" || o.File != "exp.yaml" {
		t.Fatalf("Init: %+v, %v", o, err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("no spec written: %v", err)
	}
	if o, err = Init(Options{Name: "digits", Type: DefaultType, Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)}, out, true); err != nil || o.Name != "digits" {
		t.Fatalf("Init --name digits: %+v, %v", o, err)
	}
}
