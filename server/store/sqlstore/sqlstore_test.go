package sqlstore

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/rundir/mirror/mirrortest"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/storetest"
)

// newDB makes an empty database for a test and returns its URL.
type newDB func(t *testing.T) string

func sqliteDB(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "state", "rubberband.db")
}

// opener gives each test a database of its own, made at its first open and opened again at
// each later one (storetest.Open).
func opener(db newDB) storetest.Open {
	var (
		mu   sync.Mutex
		urls = map[*testing.T]string{}
	)
	return func(t *testing.T) store.Store {
		t.Helper()
		mu.Lock()
		url, ok := urls[t]
		if !ok {
			url = db(t)
			urls[t] = url
		}
		mu.Unlock()
		return openT(t, url)
	}
}

// openT opens url for the test, closed when it ends.
func openT(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLite(t *testing.T) {
	t.Run("Contract", func(t *testing.T) { storetest.RunStoreTests(t, opener(sqliteDB)) })
	t.Run("RunFiles", func(t *testing.T) {
		mirrortest.Run(t, func(t *testing.T) mirror.Store { return openT(t, sqliteDB(t)).RunFiles() })
	})
	testMigrations(t, sqliteDB)
}

// TestPostgres runs everything against one real PostgreSQL 15, a database per test.
func TestPostgres(t *testing.T) {
	pg := servers.StartPostgres(t)
	db := func(t *testing.T) string { return pg.NewDatabase(t) }
	t.Run("Contract", func(t *testing.T) { storetest.RunStoreTests(t, opener(db)) })
	t.Run("RunFiles", func(t *testing.T) {
		mirrortest.Run(t, func(t *testing.T) mirror.Store { return openT(t, db(t)).RunFiles() })
	})
	testMigrations(t, db)
}
