package sqlstore

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// dialect is all that differs between SQLite and PostgreSQL; the queries are written once, with
// ? placeholders, and the schema with type tokens ({text}, {bool}, {blob}, {float}, {id}).
type dialect struct {
	name   string // for messages: "sqlite", "postgres"
	driver string // database/sql's driver name
	types  *strings.Replacer
	// numbered: placeholders are $1, $2... rather than ?.
	numbered bool
	// forUpdate ends a SELECT whose row the transaction writes back. PostgreSQL locks the row;
	// SQLite needs nothing, its transactions begin IMMEDIATE (holding the write lock), so two
	// writers never both read the old row.
	forUpdate string
	// lockMigrations starts a migration's transaction, so that servers opening one database at
	// once migrate one at a time (SQLite's BEGIN IMMEDIATE does that by itself).
	lockMigrations string
	// constraint says what a driver's error means to a caller: ErrExists for a unique key,
	// ErrNotFound for a foreign key, nil for anything else.
	constraint func(error) error
}

func sqliteDialect() *dialect {
	return &dialect{
		name:   "sqlite",
		driver: "sqlite",
		types: strings.NewReplacer("{text}", "TEXT", "{bool}", "BOOLEAN", "{blob}", "BLOB", "{float}", "REAL",
			"{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"),
		constraint: func(err error) error {
			var e *sqlite.Error
			if !errors.As(err, &e) {
				return nil
			}
			switch e.Code() {
			case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
				return store.ErrExists
			case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
				return store.ErrNotFound
			}
			return nil
		},
	}
}

// migrationLock is the key of PostgreSQL's advisory lock around migrations ("rbschema").
const migrationLock = 0x7262736368656d61

func postgresDialect() *dialect {
	return &dialect{
		name:   "postgres",
		driver: "pgx",
		// Text sorts in byte order, as SQLite's does, whatever the database's collation.
		types: strings.NewReplacer("{text}", `TEXT COLLATE "C"`, "{bool}", "BOOLEAN", "{blob}", "BYTEA",
			"{float}", "DOUBLE PRECISION",
			"{id}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
		numbered:       true,
		forUpdate:      " FOR UPDATE",
		lockMigrations: "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(migrationLock, 10) + ")",
		constraint: func(err error) error {
			var e *pgconn.PgError
			if !errors.As(err, &e) {
				return nil
			}
			switch e.Code {
			case "23505": // unique_violation
				return store.ErrExists
			case "23503": // foreign_key_violation
				return store.ErrNotFound
			}
			return nil
		},
	}
}

// rebind turns a query's ? placeholders into the dialect's. No query has a ? inside a literal.
func (d *dialect) rebind(q string) string {
	if !d.numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
