package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/rubberband-hpo/rubberband/server/store"
)

const runColumns = `id, team, user_name, name, state, priority, submitted_at, started_at, ended_at, spec, plan,
	predicted_cost_usd, predicted_jct_s, gpus, nodes, cost_usd, dir, message, cancel_requested`

// runValues is a run's row, in runColumns' order.
func runValues(r *store.Run) []any {
	return []any{r.ID, r.Team, r.User, r.Name, string(r.State), r.Priority, micros(r.SubmittedAt),
		micros(r.StartedAt), micros(r.EndedAt), blob(r.Spec), blob(r.Plan), r.PredictedCostUSD,
		r.PredictedJCTSeconds, r.GPUs, r.Nodes, r.CostUSD, r.Dir, r.Message, r.CancelRequested}
}

func scanRun(row scanner) (store.Run, error) {
	var (
		r                         store.Run
		state                     string
		submitted, started, ended sql.NullInt64
	)
	err := row.Scan(&r.ID, &r.Team, &r.User, &r.Name, &state, &r.Priority, &submitted, &started, &ended,
		&r.Spec, &r.Plan, &r.PredictedCostUSD, &r.PredictedJCTSeconds, &r.GPUs, &r.Nodes, &r.CostUSD,
		&r.Dir, &r.Message, &r.CancelRequested)
	r.State = store.RunState(state)
	r.SubmittedAt, r.StartedAt, r.EndedAt = fromMicros(submitted), fromMicros(started), fromMicros(ended)
	r.Spec, r.Plan = unblob(r.Spec), unblob(r.Plan)
	return r, err
}

// CreateRun adds a run.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	op := "create run " + r.ID
	r.SubmittedAt = s.stamp(r.SubmittedAt)
	if err := checkRun(&r); err != nil {
		return s.fail(op, err)
	}
	_, err := s.db.ExecContext(ctx, s.q("INSERT INTO runs ("+runColumns+") VALUES (?"+strings.Repeat(", ?", 18)+")"),
		runValues(&r)...)
	return s.fail(op, err)
}

// Run is the run of that ID.
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, s.q("SELECT "+runColumns+" FROM runs WHERE id = ?"), id))
	return r, s.fail("run "+id, err)
}

// Runs lists the runs the filter keeps, oldest submission first.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var (
		where []string
		args  []any
	)
	if f.Team != "" {
		where, args = append(where, "team = ?"), append(args, f.Team)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	q := "SELECT " + runColumns + " FROM runs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY submitted_at, id"
	if f.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(q), args...)
	rs, err := scanAll(rows, err, scanRun)
	return rs, s.fail("list runs", err)
}

// UpdateRun reads the run, lets fn change it and writes it back, in one transaction.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(*store.Run) error) (store.Run, error) {
	var (
		out   store.Run
		fnErr error
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := scanRun(tx.QueryRowContext(ctx, s.q("SELECT "+runColumns+" FROM runs WHERE id = ?"+s.d.forUpdate), id))
		if err != nil {
			return err
		}
		team := r.Team
		if fnErr = fn(&r); fnErr != nil {
			return fnErr
		}
		r.ID, r.Team = id, team
		if err := checkRun(&r); err != nil {
			return err
		}
		values := runValues(&r)
		_, err = tx.ExecContext(ctx, s.q(`UPDATE runs SET user_name = ?, name = ?, state = ?, priority = ?,
			submitted_at = ?, started_at = ?, ended_at = ?, spec = ?, plan = ?, predicted_cost_usd = ?,
			predicted_jct_s = ?, gpus = ?, nodes = ?, cost_usd = ?, dir = ?, message = ?, cancel_requested = ?
			WHERE id = ?`), append(values[2:], id)...)
		out = r
		return err
	})
	if fnErr != nil {
		return store.Run{}, fnErr
	}
	if err != nil {
		return store.Run{}, s.fail("update run "+id, err)
	}
	return out, nil
}

// ChargeRun sets the run's accrued cost and adds its growth to the team's spending in month.
func (s *Store) ChargeRun(ctx context.Context, id string, costSoFar float64, month string) (float64, error) {
	op := "charge run " + id
	if err := firstErr(checkFinite("cost so far", costSoFar), checkMonth(month)); err != nil {
		return 0, s.fail(op, err)
	}
	var growth float64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var (
			team string
			cost float64
		)
		if err := tx.QueryRowContext(ctx, s.q("SELECT team FROM runs WHERE id = ?"), id).Scan(&team); err != nil {
			return err
		}
		// The team's lock first (as Decide takes it), so that a ledger never reads the run's
		// cost grown and the team's spending not yet.
		var locked string
		if err := tx.QueryRowContext(ctx, s.q("SELECT name FROM teams WHERE name = ?"+s.d.forUpdate), team).Scan(&locked); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.q("SELECT cost_usd FROM runs WHERE id = ?"+s.d.forUpdate), id).
			Scan(&cost); err != nil {
			return err
		}
		if costSoFar <= cost {
			return nil
		}
		growth = costSoFar - cost
		if _, err := tx.ExecContext(ctx, s.q("UPDATE runs SET cost_usd = ? WHERE id = ?"), costSoFar, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO spending (team, month, usd) VALUES (?, ?, ?)
			ON CONFLICT (team, month) DO UPDATE SET usd = spending.usd + excluded.usd`), team, month, growth)
		return err
	})
	if err != nil {
		return 0, s.fail(op, err)
	}
	return growth, nil
}

// Spent is what a team's runs were charged in month.
func (s *Store) Spent(ctx context.Context, team, month string) (float64, error) {
	op := "spent by " + team + " in " + month
	if err := checkMonth(month); err != nil {
		return 0, s.fail(op, err)
	}
	var usd float64
	err := s.db.QueryRowContext(ctx, s.q("SELECT usd FROM spending WHERE team = ? AND month = ?"), team, month).Scan(&usd)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return usd, s.fail(op, err)
}
