package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// AcquireLease takes or renews the named lease in one statement, a compare-and-set on the row:
// the insert takes a lease nobody has, the update takes it only from its own holder or from
// one whose expiry is at or before now. Times are the caller's, never the database's clock.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error) {
	op := fmt.Sprintf("acquire lease %s for %s", name, holder)
	if err := firstErr(checkName("lease name", name), checkName("holder", holder)); err != nil {
		return false, s.fail(op, err)
	}
	if ttl <= 0 {
		return false, s.fail(op, fmt.Errorf("%w: ttl %v", store.ErrInvalid, ttl))
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`),
		name, holder, now.Add(ttl).UnixMicro(), now.UnixMicro())
	if err != nil {
		return false, s.fail(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.fail(op, err)
	}
	return n == 1, nil
}

// ReleaseLease gives the lease up if holder holds it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := s.db.ExecContext(ctx, s.q("DELETE FROM leases WHERE name = ? AND holder = ?"), name, holder)
	return s.fail(fmt.Sprintf("release lease %s for %s", name, holder), err)
}

// Lease says who holds the named lease and until when.
func (s *Store) Lease(ctx context.Context, name string) (string, time.Time, error) {
	var (
		holder  string
		expires sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, s.q("SELECT holder, expires_at FROM leases WHERE name = ?"), name).Scan(&holder, &expires)
	if err == sql.ErrNoRows {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, s.fail("lease "+name, err)
	}
	return holder, fromMicros(expires), nil
}
