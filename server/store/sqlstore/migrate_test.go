package sqlstore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// applied lists the versions in schema_migrations with when each was applied.
func applied(t *testing.T, s *Store) [][2]int64 {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), "SELECT version, applied_at FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][2]int64
	for rows.Next() {
		var v [2]int64
		if err := rows.Scan(&v[0], &v[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func versions(vs [][2]int64) string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprint(v[0]))
	}
	return strings.Join(out, ",")
}

// withExtra is the schema's migrations and one more: a table, then stmt.
func withExtra(version int, stmt string) []migration {
	return append(migrations(), migration{version: version, about: "test",
		statements: []string{fmt.Sprintf("CREATE TABLE extra%d (x BIGINT)", version), stmt}})
}

func testMigrations(t *testing.T, db newDB) {
	t.Run("ReopenAppliesNothing", func(t *testing.T) {
		url := db(t)
		first := applied(t, openT(t, url))
		if versions(first) != "1" {
			t.Fatalf("applied %v, want version 1", first)
		}
		if again := applied(t, openT(t, url)); !reflect.DeepEqual(again, first) {
			t.Fatalf("reopening changed schema_migrations: %v, was %v", again, first)
		}
	})
	t.Run("NewMigrationOnceThenNewerRefused", func(t *testing.T) {
		url := db(t)
		openT(t, url).Close()
		for range 2 {
			s, err := open(t.Context(), url, withExtra(2, "CREATE INDEX extra2_x ON extra2 (x)"))
			if err != nil {
				t.Fatal(err)
			}
			if v := versions(applied(t, s)); v != "1,2" {
				t.Fatalf("versions %s, want 1,2", v)
			}
			s.Close()
		}
		_, err := Open(t.Context(), url)
		if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("opening a newer database: %v, want ErrSchemaTooNew naming version 2", err)
		}
	})
	t.Run("FailedMigrationChangesNothing", func(t *testing.T) {
		url := db(t)
		openT(t, url).Close()
		_, err := open(t.Context(), url, withExtra(2, "CREATE TABLE broken ("))
		if err == nil || !strings.Contains(err.Error(), "migration 2 (test)") {
			t.Fatalf("a broken migration opened: %v", err)
		}
		s := openT(t, url)
		if v := versions(applied(t, s)); v != "1" {
			t.Fatalf("versions %s after a failed migration, want 1", v)
		}
		if _, err := s.db.ExecContext(t.Context(), "SELECT x FROM extra2"); err == nil {
			t.Fatal("the failed migration's first table is there")
		}
	})
	t.Run("ConcurrentOpensMigrateOnce", func(t *testing.T) {
		url := db(t)
		var wg sync.WaitGroup
		stores := make([]*Store, 4)
		errs := make([]error, 4)
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = open(t.Context(), url, withExtra(2, "SELECT 1")) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("open %d: %v", i, err)
			}
			defer stores[i].Close()
		}
		if v := versions(applied(t, stores[0])); v != "1,2" {
			t.Fatalf("versions %s, want 1,2 once each", v)
		}
	})
	t.Run("NoDriverErrorLeaks", func(t *testing.T) {
		s := openT(t, db(t))
		if _, err := s.db.ExecContext(t.Context(), "DROP TABLE leases"); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Lease(t.Context(), "driver")
		var (
			se *sqlite.Error
			pe *pgconn.PgError
		)
		if err == nil || errors.As(err, &se) || errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "lease driver: ") {
			t.Fatalf("error %v (%T): want the driver's message, not its type", err, errors.Unwrap(err))
		}
	})
}
