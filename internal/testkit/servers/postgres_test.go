package servers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The helper's server accepts connections at once and makes databases of their own for tests.
func TestPostgresStartsAndMakesDatabases(t *testing.T) {
	p := StartPostgres(t)
	if !strings.HasSuffix(strings.Split(p.URL, "?")[0], "/rubberband") {
		t.Fatalf("URL %s: want the rubberband database", p.URL)
	}
	url := p.NewDatabase(t)
	out, err := exec.Command(filepath.Join(p.bin, "psql"), "--no-psqlrc", "-At", "-c", "select current_database()", url).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "rubberband2" {
		t.Fatalf("psql %s: %v: %s", url, err, out)
	}
	dir := p.dir
	p.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", dir, err)
	}
	if out, err := exec.Command(filepath.Join(p.bin, "pg_isready"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port)).CombinedOutput(); err == nil {
		t.Fatalf("still accepting connections after Stop: %s", out)
	}
}
