package spec

import (
	"path/filepath"
	"testing"
	"time"
)

// The local catalog is ROOT/catalog.json when there is one, and none when there is not; a file
// named with --catalog must exist.
func TestReadLocalCatalog(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if path, f, err := ReadLocalCatalog("", root); path != "" || f != nil || err != nil {
		t.Fatalf("no local catalog: %q, %v, %v", path, f, err)
	}
	if _, _, err := ReadLocalCatalog(filepath.Join(root, LocalCatalogName), root); err == nil {
		t.Fatal("a --catalog file that is not there was read")
	}
	want := &CatalogFile{Version: CatalogFileVersion, Region: "us-west-2", FetchedAt: time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC),
		InstanceTypes: []InstanceType{{Name: "g5.xlarge", GPUs: 1, GPUModel: "A10G", PricePerHour: 1.006, Source: "s"}}}
	if err := WriteCatalogFile(LocalCatalogPath("", root), want); err != nil {
		t.Fatal(err)
	}
	path, f, err := ReadLocalCatalog("", root)
	if err != nil || path != filepath.Join(root, LocalCatalogName) || f == nil || f.Region != "us-west-2" {
		t.Fatalf("ROOT/catalog.json: %q, %+v, %v", path, f, err)
	}
	if got := LocalCatalogPath("elsewhere.json", root); got != "elsewhere.json" {
		t.Fatalf("--catalog elsewhere.json: %q", got)
	}
}
