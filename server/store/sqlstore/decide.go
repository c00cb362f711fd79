package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Decide runs decide under the team's lock: PostgreSQL locks the team's row (FOR UPDATE) for
// the transaction; SQLite's transactions begin IMMEDIATE, holding the database's write lock.
// ChargeRun takes the same lock, so a ledger never sees a charge half made.
func (s *Store) Decide(ctx context.Context, team, month string, decide func(store.Ledger) (store.Decision, error)) (store.Decision, error) {
	op := "decide for team " + team
	if err := checkMonth(month); err != nil {
		return store.Decision{}, s.fail(op, err)
	}
	var (
		out   store.Decision
		fnErr error
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var l store.Ledger
		var err error
		if l.Team, err = scanTeam(tx.QueryRowContext(ctx, s.q(teamSelect+" WHERE name = ?"+s.d.forUpdate), team)); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.q("SELECT usd FROM spending WHERE team = ? AND month = ?"), team, month).Scan(&l.Spent); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.q("SELECT "+runColumns+" FROM runs WHERE team = ? AND state IN (?, ?, ?) ORDER BY submitted_at, id"),
			team, string(store.Queued), string(store.Running), string(store.Paused))
		if l.Active, err = scanAll(rows, err, scanRun); err != nil {
			return err
		}
		if out, fnErr = decide(l); fnErr != nil {
			return fnErr
		}
		if r := out.Create; r != nil {
			r.SubmittedAt = s.stamp(r.SubmittedAt)
			if err := checkRun(r); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q("INSERT INTO runs ("+runColumns+") VALUES (?"+strings.Repeat(", ?", 18)+")"), runValues(r)...); err != nil {
				return err
			}
		}
		var written []store.Run
		for _, r := range out.Queued {
			if err := checkRun(&r); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET state = ?, started_at = ?, ended_at = ?, message = ?
				WHERE id = ? AND team = ? AND state = ?`), string(r.State), micros(r.StartedAt), micros(r.EndedAt), r.Message,
				r.ID, team, string(store.Queued))
			if err := s.oneRow(res, err); errors.Is(err, sql.ErrNoRows) {
				continue // no longer queued: cancelled meanwhile
			} else if err != nil {
				return err
			}
			written = append(written, r)
		}
		out.Queued = written
		return nil
	})
	if fnErr != nil {
		return store.Decision{}, fnErr
	}
	if err != nil {
		return store.Decision{}, s.fail(op, err)
	}
	return out, nil
}
