package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// defaultAuditLimit is how many entries Audit lists when the filter leaves Limit zero.
const defaultAuditLimit = 100

// AddAudit records an action.
func (s *Store) AddAudit(ctx context.Context, e store.AuditEntry) error {
	op := fmt.Sprintf("audit %s by %s", e.Action, e.User)
	if err := checkAudit(e); err != nil {
		return s.fail(op, err)
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO audit (at, user_name, team, action, target, detail)
		VALUES (?, ?, ?, ?, ?, ?)`), micros(s.stamp(e.At)), e.User, e.Team, e.Action, e.Target, e.Detail)
	return s.fail(op, err)
}

// Audit lists the newest entries first (ties: the later recorded first).
func (s *Store) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	q, args := "SELECT id, at, user_name, team, action, target, detail FROM audit", []any{}
	if f.Team != "" {
		q, args = q+" WHERE team = ?", append(args, f.Team)
	}
	q, args = q+" ORDER BY at DESC, id DESC LIMIT ?", append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.q(q), args...)
	es, err := scanAll(rows, err, func(row scanner) (store.AuditEntry, error) {
		var (
			e  store.AuditEntry
			at sql.NullInt64
		)
		err := row.Scan(&e.ID, &at, &e.User, &e.Team, &e.Action, &e.Target, &e.Detail)
		e.At = fromMicros(at)
		return e, err
	})
	return es, s.fail("list audit", err)
}
