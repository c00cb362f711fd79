// Package sqlstore is store.Store over database/sql, one implementation for both of the
// server's databases: SQLite (modernc.org/sqlite, pure Go, the default for one machine) and
// PostgreSQL (pgx, for servers that share one database). The queries are written once; what
// differs between the two (placeholders, column types, row locks, constraint errors, the lock
// that serialises migrations) sits in a dialect value. Open applies the versioned migrations
// the database lacks, each once, in a transaction, and refuses a database newer than the code.
package sqlstore
