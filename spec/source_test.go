package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// LoadSource returns the very bytes it parsed, the spec's and its profile's, so that a run can
// keep them: a copy read later may hold an edit made in between.
func TestLoadSourceKeepsWhatItParsed(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../examples/digits-mlp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := os.ReadFile("../examples/profiles/digits-mlp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "profiles"), 0o700)
	path := filepath.Join(dir, "spec.yaml")
	os.WriteFile(path, data, 0o600)
	os.WriteFile(filepath.Join(dir, "profiles", "digits-mlp.yaml"), prof, 0o600)
	exp, src, err := LoadSource(path)
	if err != nil {
		t.Fatal(err)
	}
	if src.Path != path || !bytes.Equal(src.Data, data) || len(src.Files) != 1 || !bytes.Equal(src.Files["profiles/digits-mlp.yaml"], prof) {
		t.Fatalf("source %s: %d bytes, files %v", src.Path, len(src.Data), len(src.Files))
	}
	if files := exp.ProfileFiles(); len(files) != 1 || files[0] != "profiles/digits-mlp.yaml" {
		t.Fatalf("profile files %v", files)
	}
	// Parsing the source again, with no file on disk, gives the same experiment.
	os.RemoveAll(dir)
	again, err := Parse(path, src.Data, func(ref string) ([]byte, error) { return src.Files[ref], nil })
	if err != nil || again.Name != exp.Name || again.Profile.IterLatency[1].Mean != exp.Profile.IterLatency[1].Mean {
		t.Fatalf("parsed again: %v", err)
	}
}
