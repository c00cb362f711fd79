package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Store is store.Store over a SQLite or PostgreSQL database.
type Store struct {
	db *sql.DB
	d  *dialect
	// now stamps zero creation times.
	now       func() time.Time
	closeOnce sync.Once
	closeErr  error
	// name is the database's URL, its password hidden: what messages say.
	name string
}

// Describe names the database, its password hidden.
func (s *Store) Describe() string { return s.name }

var _ store.Store = (*Store)(nil)

// busyTimeout is how long a SQLite writer waits for another (in this process or another) to
// commit before it gives up with "database is locked".
const busyTimeout = 30 * time.Second

// Open opens the database at url and applies the migrations it lacks: "sqlite:PATH" (the file
// is created 0600, and its directory 0700 when missing) or "postgres://..." ("postgresql://").
func Open(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, migrations())
}

// open is Open with the migrations given, for tests of migrating.
func open(ctx context.Context, rawURL string, ms []migration) (*Store, error) {
	var (
		d   *dialect
		dsn string
		err error
	)
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		d = sqliteDialect()
		if dsn, err = sqliteDSN(strings.TrimPrefix(rawURL, "sqlite:")); err != nil {
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		d, dsn = postgresDialect(), rawURL
	default:
		return nil, fmt.Errorf("open database: %q is neither sqlite:PATH nor postgres://...", redact(rawURL))
	}
	db, err := sql.Open(d.driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %v", redact(rawURL), err)
	}
	// Enough for a server's handlers; SQLite's writers queue on its lock whatever the count.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	s := &Store{db: db, d: d, now: time.Now, name: redact(rawURL)}
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, s.fail("open "+redact(rawURL), err)
	}
	if err := s.migrate(ctx, ms); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", redact(rawURL), err)
	}
	return s, nil
}

// ping connects, waiting up to busyTimeout while another connection holds the lock: a
// connection's set-up (its pragmas, WAL mode on a new database) can be answered "database is
// locked" at once rather than after the busy timeout (seen under load in
// TestSQLite/ConcurrentOpensMigrateOnce).
func ping(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// sqliteDSN makes the file (0600, in a directory made 0700) before SQLite would make it with
// its default 0644, and names the settings every connection takes: WAL (readers do not wait
// on the writer), a busy timeout (writers wait on each other rather than fail), foreign keys
// on, and transactions that begin IMMEDIATE (holding the write lock, so that a
// read-modify-write never reads a row another writer is about to change).
func sqliteDSN(path string) (string, error) {
	if strings.HasPrefix(path, "//") { // sqlite:///abs/path
		path = path[2:]
	}
	if path == "" {
		return "", errors.New("no path after sqlite:")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	f.Close()
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String(), nil
}

// redact hides a URL's password from messages; of one that does not parse, all it says
// before the host.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
		return scheme + "://xxxxx" + rest[at:]
	}
	return raw
}

// Close closes the database; a second Close does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// tx runs fn in a transaction, committed when fn returns nil and rolled back otherwise (a
// panic in fn included: the connection goes back to the pool clean).
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit it does nothing
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// q is query in the dialect's placeholders.
func (s *Store) q(query string) string { return s.d.rebind(query) }

// fail wraps err with what was being done. The store's errors and a context's pass through
// for errors.Is, as do constraint violations and missing rows turned into ErrExists and
// ErrNotFound; any other driver error is flattened to its text, so no driver type leaks.
func (s *Store) fail(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, context.Canceled)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	}
	for _, ours := range []error{store.ErrNotFound, store.ErrExists, store.ErrInvalid, ErrSchemaTooNew} {
		if errors.Is(err, ours) {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if e := s.d.constraint(err); e != nil {
		return fmt.Errorf("%s: %w", op, e)
	}
	return fmt.Errorf("%s: %s", op, err)
}

// AbsURL is url with a SQLite path made absolute, so that another process in another folder (a
// server's driver) opens the same file; any other URL is as it is.
func AbsURL(url string) (string, error) {
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return url, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return "sqlite:" + abs, nil
}
