package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrSchemaTooNew: the database was migrated by a newer rubberband than this one, whose
// queries may no longer fit it.
var ErrSchemaTooNew = errors.New("database schema is newer than this rubberband")

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version BIGINT PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`

// migrate applies the migrations the database lacks, in order, each in a transaction of its
// own that first takes the dialect's migration lock and reads the version again: of two servers
// opening one database at once, the second finds the work done.
func (s *Store) migrate(ctx context.Context, ms []migration) error {
	for {
		applied, err := s.migrateNext(ctx, ms)
		if err != nil {
			return err
		}
		if !applied {
			return nil
		}
	}
}

// migrateNext applies the first migration the database lacks, reporting whether there was one.
func (s *Store) migrateNext(ctx context.Context, ms []migration) (applied bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if s.d.lockMigrations != "" {
			if _, err := tx.ExecContext(ctx, s.d.lockMigrations); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, migrationsTable); err != nil {
			return err
		}
		var v sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
			return err
		}
		if known := ms[len(ms)-1].version; v.Int64 > int64(known) {
			return fmt.Errorf("%w: it is at version %d, this rubberband knows up to %d: upgrade rubberband",
				ErrSchemaTooNew, v.Int64, known)
		}
		for _, m := range ms {
			if int64(m.version) <= v.Int64 {
				continue
			}
			for _, stmt := range m.sql(s.d) {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migration %d (%s): %w", m.version, m.about, err)
				}
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"),
				m.version, time.Now().UnixMicro()); err != nil {
				return err
			}
			applied = true
			return nil
		}
		return nil
	})
	if err != nil {
		return false, s.fail("migrate", err)
	}
	return applied, nil
}
