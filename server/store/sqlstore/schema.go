package sqlstore

// migration is one step of the schema. Its statements are written once, with type tokens the
// dialect fills; byDialect replaces them where one database needs other SQL altogether.
type migration struct {
	version    int
	about      string
	statements []string
	byDialect  map[string][]string
}

// sql is what the migration runs in d.
func (m migration) sql(d *dialect) []string {
	stmts := m.statements
	if s, ok := m.byDialect[d.name]; ok {
		stmts = s
	}
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = d.types.Replace(s)
	}
	return out
}

// migrations lists the schema's steps in order. Append only: a released step never changes,
// since databases out there have applied it.
//
// Text sorts in byte order in both ({text}). Times are microseconds since 1970 UTC in BIGINT
// (NULL: the zero time), the same in both databases and compared as numbers. Runs name their user without a foreign key: a user's
// runs outlive the user.
func migrations() []migration {
	return []migration{{
		version: 1,
		about:   "teams, users, runs, spending, audit, leases",
		statements: []string{
			`CREATE TABLE teams (
				name {text} PRIMARY KEY,
				max_gpus BIGINT NOT NULL,
				max_nodes BIGINT NOT NULL,
				monthly_budget_usd {float} NOT NULL,
				created_at BIGINT NOT NULL
			)`,
			`CREATE TABLE users (
				name {text} PRIMARY KEY,
				team {text} NOT NULL REFERENCES teams (name),
				admin {bool} NOT NULL,
				token_hash {blob} NOT NULL UNIQUE,
				created_at BIGINT NOT NULL
			)`,
			`CREATE INDEX users_team ON users (team)`,
			`CREATE TABLE runs (
				id {text} PRIMARY KEY,
				team {text} NOT NULL REFERENCES teams (name),
				user_name {text} NOT NULL,
				name {text} NOT NULL,
				state {text} NOT NULL,
				priority BIGINT NOT NULL,
				submitted_at BIGINT NOT NULL,
				started_at BIGINT,
				ended_at BIGINT,
				spec {blob} NOT NULL,
				plan {blob} NOT NULL,
				predicted_cost_usd {float} NOT NULL,
				predicted_jct_s {float} NOT NULL,
				gpus BIGINT NOT NULL,
				nodes BIGINT NOT NULL,
				cost_usd {float} NOT NULL,
				dir {text} NOT NULL,
				message {text} NOT NULL,
				cancel_requested {bool} NOT NULL
			)`,
			`CREATE INDEX runs_submitted ON runs (submitted_at, id)`,
			`CREATE INDEX runs_team_submitted ON runs (team, submitted_at, id)`,
			`CREATE INDEX runs_state ON runs (state)`,
			`CREATE TABLE spending (
				team {text} NOT NULL REFERENCES teams (name),
				month {text} NOT NULL,
				usd {float} NOT NULL,
				PRIMARY KEY (team, month)
			)`,
			`CREATE TABLE audit (
				id {id},
				at BIGINT NOT NULL,
				user_name {text} NOT NULL,
				team {text} NOT NULL,
				action {text} NOT NULL,
				target {text} NOT NULL,
				detail {text} NOT NULL
			)`,
			`CREATE INDEX audit_at ON audit (at, id)`,
			`CREATE INDEX audit_team_at ON audit (team, at, id)`,
			`CREATE TABLE leases (
				name {text} PRIMARY KEY,
				holder {text} NOT NULL,
				expires_at BIGINT NOT NULL
			)`,
		},
	}, {
		version: 2,
		about:   "the runs' state directories, mirrored (RunFiles)",
		statements: []string{
			`CREATE TABLE run_files (
				run {text} NOT NULL,
				name {text} NOT NULL,
				size BIGINT NOT NULL,
				PRIMARY KEY (run, name)
			)`,
			`CREATE TABLE run_chunks (
				run {text} NOT NULL,
				name {text} NOT NULL,
				at BIGINT NOT NULL,
				data {blob} NOT NULL,
				PRIMARY KEY (run, name, at)
			)`,
		},
	}, {
		version: 3,
		about:   "teams' queue limits and storage prefixes (newline-separated)",
		statements: []string{
			`ALTER TABLE teams ADD COLUMN max_queued_runs BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE teams ADD COLUMN storage_prefixes {text} NOT NULL DEFAULT ''`,
		},
	}}
}
