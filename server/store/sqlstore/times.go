package sqlstore

import (
	"database/sql"
	"time"
)

// Times are kept as microseconds since 1970 UTC: one integer type in both databases, exact,
// and ordered as numbers. NULL is the zero time.

func micros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func fromMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64).UTC()
}

// stamp is t, or the store's clock when t is zero (a creation time the caller left to us).
func (s *Store) stamp(t time.Time) time.Time {
	if t.IsZero() {
		return s.now()
	}
	return t
}

// blob is b, never nil: PostgreSQL's driver sends a nil slice as NULL.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// unblob is b, nil when empty, so that both databases give back the same.
func unblob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
