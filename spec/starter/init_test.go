package starter

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	o, _, err := Init(Options{Type: DefaultType, Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)}, out, false)
	if err != nil || o.Name != "mnist" || o.File != "exp.yaml" {
		t.Fatalf("Init: %+v, %v", o, err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("no spec written: %v", err)
	}
	if o, _, err = Init(Options{Name: "digits", Type: DefaultType, Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)}, out, true); err != nil || o.Name != "digits" {
		t.Fatalf("Init --name digits: %+v, %v", o, err)
	}
}

// init SCRIPT: the spec goes beside the script it names and runs it, even among other scripts;
// a script that is not there, or an --out in another folder, is the user's to change.
func TestInitNamesTheScript(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"prep.py", "train.py"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("lr = params['lr']\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := Options{Type: DefaultType, Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)}
	o := base
	o.Script = filepath.Join(dir, "train.py")
	o, out, err := Init(o, "", false)
	if err != nil || out != filepath.Join(dir, DefaultFile) || o.Script != "train.py" || len(o.Command) != 2 || o.Command[1] != "train.py" || o.Name != "proj" {
		t.Fatalf("Init(train.py) = %+v, %q, %v", o, out, err)
	}
	if _, _, err := spec.LoadSource(out, spec.ProfileOptional()); err != nil {
		t.Fatalf("the spec written: %v", err)
	}
	var input *InputError
	missing := base
	missing.Script = filepath.Join(dir, "nope.py")
	if _, _, err := Init(missing, "", true); !errors.As(err, &input) || !strings.Contains(err.Error(), "nope.py") {
		t.Errorf("a missing script: %v", err)
	}
	elsewhere := base
	elsewhere.Script = filepath.Join(dir, "train.py")
	if _, _, err := Init(elsewhere, filepath.Join(t.TempDir(), DefaultFile), true); !errors.As(err, &input) {
		t.Errorf("--out in another folder: %v", err)
	}
}
