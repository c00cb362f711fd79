package spec

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The local file is named above its rows; a figure the catalog lacks is a dash, not a zero.
func TestWriteCatalog(t *testing.T) {
	f := &CatalogFile{Version: 1, Region: "eu-west-1", FetchedAt: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC),
		InstanceTypes: []InstanceType{{Name: "g9.xlarge", GPUs: 1, GPUModel: "X1", PricePerHour: 1.5}}}
	var out bytes.Buffer
	WriteCatalog(&out, "/r/catalog.json", f, []CatalogRow{{InstanceType: f.InstanceTypes[0], Origin: OriginLocal}})
	lines := strings.Split(out.String(), "\n")
	if want := "local catalog /r/catalog.json: 1 type in eu-west-1, fetched 2026-08-01T12:00:00Z"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if fields := strings.Fields(lines[2]); len(fields) != 9 || fields[0] != "g9.xlarge" || fields[3] != "-" || fields[4] != "-" || fields[7] != "1.5000" || fields[8] != "local" {
		t.Errorf("the row: %q", lines[2])
	}
	var builtin bytes.Buffer
	WriteCatalog(&builtin, "", nil, nil)
	if strings.HasPrefix(builtin.String(), "local catalog") {
		t.Errorf("no local file, yet:\n%s", builtin.String())
	}
}
