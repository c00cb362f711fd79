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

// all is every version of the schema, as versions writes them; next is the one after the last.
func all() (string, int) {
	var vs [][2]int64
	for _, m := range migrations() {
		vs = append(vs, [2]int64{int64(m.version)})
	}
	return versions(vs), len(vs) + 1
}

func testMigrations(t *testing.T, db newDB) {
	every, next := all()
	t.Run("ReopenAppliesNothing", func(t *testing.T) {
		url := db(t)
		first := applied(t, openT(t, url))
		if versions(first) != every {
			t.Fatalf("applied %v, want versions %s", first, every)
		}
		if again := applied(t, openT(t, url)); !reflect.DeepEqual(again, first) {
			t.Fatalf("reopening changed schema_migrations: %v, was %v", again, first)
		}
	})
	t.Run("NewMigrationOnceThenNewerRefused", func(t *testing.T) {
		url := db(t)
		openT(t, url).Close()
		for range 2 {
			s, err := open(t.Context(), url, withExtra(next, fmt.Sprintf("CREATE INDEX extra%d_x ON extra%d (x)", next, next)))
			if err != nil {
				t.Fatal(err)
			}
			if v, want := versions(applied(t, s)), fmt.Sprintf("%s,%d", every, next); v != want {
				t.Fatalf("versions %s, want %s", v, want)
			}
			s.Close()
		}
		_, err := Open(t.Context(), url)
		if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", next)) {
			t.Fatalf("opening a newer database: %v, want ErrSchemaTooNew naming version %d", err, next)
		}
	})
	t.Run("FailedMigrationChangesNothing", func(t *testing.T) {
		url := db(t)
		openT(t, url).Close()
		_, err := open(t.Context(), url, withExtra(next, "CREATE TABLE broken ("))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migration %d (test)", next)) {
			t.Fatalf("a broken migration opened: %v", err)
		}
		s := openT(t, url)
		if v := versions(applied(t, s)); v != every {
			t.Fatalf("versions %s after a failed migration, want %s", v, every)
		}
		if _, err := s.db.ExecContext(t.Context(), fmt.Sprintf("SELECT x FROM extra%d", next)); err == nil {
			t.Fatal("the failed migration's first table is there")
		}
	})
	t.Run("ConcurrentOpensMigrateOnce", func(t *testing.T) {
		url := db(t)
		var wg sync.WaitGroup
		stores := make([]*Store, 4)
		errs := make([]error, 4)
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = open(t.Context(), url, withExtra(next, "SELECT 1")) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("open %d: %v", i, err)
			}
			defer stores[i].Close()
		}
		if v, want := versions(applied(t, stores[0])), fmt.Sprintf("%s,%d", every, next); v != want {
			t.Fatalf("versions %s, want %s once each", v, want)
		}
	})
	// A database a released server made (version 1 only) gains the mirror's tables and the
	// teams' new columns at the next Open, keeping its teams (no queue limit, no prefixes).
	t.Run("UpgradeFromOne", func(t *testing.T) {
		url := db(t)
		old, err := open(t.Context(), url, migrations()[:1])
		if err != nil {
			t.Fatal(err)
		}
		// As version 1's server wrote it: this one's queries name the later columns.
		if _, err := old.db.ExecContext(t.Context(), old.q(`INSERT INTO teams (name, max_gpus, max_nodes, monthly_budget_usd, created_at)
			VALUES (?, 4, 1, 10, 1)`), "ml"); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := openT(t, url)
		if v := versions(applied(t, s)); v != every {
			t.Fatalf("versions %s after upgrading, want %s", v, every)
		}
		if team, err := s.Team(t.Context(), "ml"); err != nil || team.MaxGPUs != 4 || team.MaxQueuedRuns != 0 || team.StoragePrefixes != nil {
			t.Fatalf("the team made at version 1: %+v, %v", team, err)
		}
		if err := s.RunFiles().Append(t.Context(), "teams/ml/r", "journal.jsonl", 0, []byte("{}\n")); err != nil {
			t.Fatalf("the mirror after upgrading: %v", err)
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
