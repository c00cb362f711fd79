package sqlstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SQLite's file is the server's alone (0600 in a 0700 directory), in WAL mode, with foreign
// keys on.
func TestSQLiteFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := openT(t, "sqlite:"+filepath.Join(dir, "rb.db"))
	if _, err := s.db.ExecContext(t.Context(), "INSERT INTO leases (name, holder, expires_at) VALUES ('x', 'y', 1)"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, "rb.db": 0o600, "rb.db-wal": 0o600, "rb.db-shm": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s is %v, want %v", filepath.Join(dir, name), fi.Mode().Perm(), want)
		}
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "30000"} {
		var got string
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q (%v), want %q", pragma, got, err, want)
		}
	}
}

func TestOpenRefusesOtherURLs(t *testing.T) {
	for url, says := range map[string]string{
		"mysql://db/rb":               "neither sqlite:PATH nor postgres://",
		"rb.db":                       "neither",
		"sqlite:":                     "no path after sqlite:",
		"postgres://u:secret@[::1/rb": "xxxxx",
	} {
		_, err := Open(t.Context(), url)
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) = %v, want an error saying %q (and no password)", url, err, says)
		}
	}
}
