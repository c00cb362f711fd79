package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// CreateTeam adds a team.
func (s *Store) CreateTeam(ctx context.Context, t store.Team) error {
	op := "create team " + t.Name
	if err := checkTeam(t); err != nil {
		return s.fail(op, err)
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO teams (name, max_gpus, max_nodes, monthly_budget_usd, max_queued_runs,
		storage_prefixes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`), t.Name, t.MaxGPUs, t.MaxNodes, t.MonthlyBudgetUSD,
		t.MaxQueuedRuns, strings.Join(t.StoragePrefixes, "\n"), micros(s.stamp(t.CreatedAt)))
	return s.fail(op, err)
}

// UpdateTeam replaces a team's quotas, budget, queue limit and storage prefixes.
func (s *Store) UpdateTeam(ctx context.Context, t store.Team) error {
	op := "update team " + t.Name
	if err := checkTeam(t); err != nil {
		return s.fail(op, err)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE teams SET max_gpus = ?, max_nodes = ?, monthly_budget_usd = ?,
		max_queued_runs = ?, storage_prefixes = ? WHERE name = ?`), t.MaxGPUs, t.MaxNodes, t.MonthlyBudgetUSD,
		t.MaxQueuedRuns, strings.Join(t.StoragePrefixes, "\n"), t.Name)
	return s.fail(op, s.oneRow(res, err))
}

// Team is the team of that name.
func (s *Store) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, s.q(teamSelect+" WHERE name = ?"), name))
	return t, s.fail("team "+name, err)
}

// Teams lists every team by name.
func (s *Store) Teams(ctx context.Context) ([]store.Team, error) {
	rows, err := s.db.QueryContext(ctx, teamSelect+" ORDER BY name")
	ts, err := scanAll(rows, err, scanTeam)
	return ts, s.fail("list teams", err)
}

const teamSelect = "SELECT name, max_gpus, max_nodes, monthly_budget_usd, max_queued_runs, storage_prefixes, created_at FROM teams"

func scanTeam(row scanner) (store.Team, error) {
	var (
		t        store.Team
		prefixes string
		created  sql.NullInt64
	)
	err := row.Scan(&t.Name, &t.MaxGPUs, &t.MaxNodes, &t.MonthlyBudgetUSD, &t.MaxQueuedRuns, &prefixes, &created)
	t.CreatedAt = fromMicros(created)
	if prefixes != "" {
		t.StoragePrefixes = strings.Split(prefixes, "\n")
	}
	return t, err
}

// CreateUser adds a user.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	op := "create user " + u.Name
	if err := checkUser(u); err != nil {
		return s.fail(op, err)
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO users (name, team, admin, token_hash, created_at)
		VALUES (?, ?, ?, ?, ?)`), u.Name, u.Team, u.Admin, u.TokenHash, micros(s.stamp(u.CreatedAt)))
	return s.fail(op, err)
}

// UserByTokenHash is the user whose token hashes to hash.
func (s *Store) UserByTokenHash(ctx context.Context, hash []byte) (store.User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, s.q(userSelect+" WHERE token_hash = ?"), blob(hash)))
	return u, s.fail("user by token", err)
}

// User is the user of that name.
func (s *Store) User(ctx context.Context, name string) (store.User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, s.q(userSelect+" WHERE name = ?"), name))
	return u, s.fail("user "+name, err)
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	rows, err := s.db.QueryContext(ctx, userSelect+" ORDER BY name")
	us, err := scanAll(rows, err, scanUser)
	return us, s.fail("list users", err)
}

// DeleteUser removes a user; their runs stay.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, s.q("DELETE FROM users WHERE name = ?"), name)
	return s.fail("delete user "+name, s.oneRow(res, err))
}

const userSelect = "SELECT name, team, admin, token_hash, created_at FROM users"

func scanUser(row scanner) (store.User, error) {
	var (
		u       store.User
		created sql.NullInt64
	)
	err := row.Scan(&u.Name, &u.Team, &u.Admin, &u.TokenHash, &created)
	u.CreatedAt = fromMicros(created)
	return u, err
}

// scanner is a row to scan: *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanAll scans every row of a query with scan.
func scanAll[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// oneRow turns an update or delete that changed no row into sql.ErrNoRows.
func (s *Store) oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return sql.ErrNoRows
	}
	return nil
}
