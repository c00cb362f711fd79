package store

import (
	"context"
	"errors"
	"time"
)

// Errors of a Store, for callers to tell apart with errors.Is.
var (
	// ErrNotFound: no team, user or run of that name or ID.
	ErrNotFound = errors.New("not found")
	// ErrExists: a team or user of that name (or token), or a run of that ID, exists already.
	ErrExists = errors.New("already exists")
	// ErrInvalid: a value the store will not hold (an empty or over-long name, a spec over
	// MaxSpecBytes, a state it does not know, a negative quota, a cost that is not a number):
	// the caller's mistake, for the server to answer with 400 rather than 500.
	ErrInvalid = errors.New("invalid")
)

// Bounds on what a caller can make the store hold, so that one request cannot fill its database.
const (
	MaxSpecBytes = 1 << 20  // Run.Spec
	MaxPlanBytes = 16 << 20 // Run.Plan
	MaxNameBytes = 256      // names and IDs: of teams, users, runs, leases and their holders
	MaxTextBytes = 64 << 10 // free text: Run.Message, Run.Dir, Run.Name, AuditEntry's fields
)

// Store is the server's database. Every method is safe for concurrent use and atomic: a method
// that fails has changed nothing. Times are stored to the microsecond, in UTC; a zero creation
// time (Team.CreatedAt, User.CreatedAt, Run.SubmittedAt, AuditEntry.At) is the store's clock at
// the call, other zero times stay zero. Strings must be valid UTF-8 without NUL bytes (what
// PostgreSQL's text holds), within the bounds above; ErrInvalid otherwise.
type Store interface {
	// CreateTeam adds a team (ErrExists when its name is taken).
	CreateTeam(ctx context.Context, t Team) error
	// UpdateTeam replaces a team's quotas, budget, queue limit and storage prefixes (ErrNotFound
	// when there is none).
	UpdateTeam(ctx context.Context, t Team) error
	// Team is the team of that name (ErrNotFound).
	Team(ctx context.Context, name string) (Team, error)
	// Teams lists every team by name (in byte order, as every listing here sorts text).
	Teams(ctx context.Context) ([]Team, error)

	// CreateUser adds a user (ErrExists when the name or the token hash is taken, ErrNotFound
	// when the team is not there). TokenHash must not be empty.
	CreateUser(ctx context.Context, u User) error
	// UserByTokenHash is the user whose token hashes to hash (ErrNotFound).
	UserByTokenHash(ctx context.Context, hash []byte) (User, error)
	// User is the user of that name (ErrNotFound).
	User(ctx context.Context, name string) (User, error)
	// Users lists every user by name.
	Users(ctx context.Context) ([]User, error)
	// DeleteUser removes a user (ErrNotFound); their runs stay.
	DeleteUser(ctx context.Context, name string) error

	// CreateRun adds a run (ErrExists when its ID is taken, ErrNotFound when its team is not
	// there).
	CreateRun(ctx context.Context, r Run) error
	// Run is the run of that ID (ErrNotFound).
	Run(ctx context.Context, id string) (Run, error)
	// Runs lists the runs the filter keeps, oldest submission first (ties by ID).
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// UpdateRun reads the run, lets fn change it and writes it back, in one transaction: two
	// updates of one run never interleave. An error from fn aborts it and is returned; ID and
	// Team cannot change (fn's changes to them are ignored). ErrNotFound when there is no run.
	// fn runs inside the transaction, holding the run's lock (in SQLite, the database's write
	// lock): it must be quick and must not call the store.
	UpdateRun(ctx context.Context, id string, fn func(*Run) error) (Run, error)
	// ChargeRun sets the run's accrued cost to costSoFar and adds what it grew by since the last
	// charge to its team's spending in month ("2026-11"), in one transaction, and returns that
	// growth. A cost below the run's current one charges nothing (a meter never runs back).
	ChargeRun(ctx context.Context, id string, costSoFar float64, month string) (float64, error)
	// Spent is what a team's runs were charged in month (0 when nothing was, or there is no
	// such team).
	Spent(ctx context.Context, team, month string) (float64, error)

	// Decide runs decide under the team's lock, which serializes every Decide of one team and
	// every ChargeRun of its runs, across processes and servers on one database: decide reads
	// the team's ledger for month ("2026-11") and says what to write, in the same transaction.
	// So two admissions (or starts) never both spend what is left of one budget or quota. An
	// error from decide aborts it and is returned as is; ErrNotFound when there is no team.
	// decide must be quick and must not call the store.
	Decide(ctx context.Context, team, month string, decide func(Ledger) (Decision, error)) (Decision, error)
	// AddAudit records an action (its ID is given by the store).
	AddAudit(ctx context.Context, e AuditEntry) error
	// Audit lists the newest entries first, those of f.Team only when it is set, at most f.Limit
	// (0: 100).
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)

	// AcquireLease takes the named lease for holder until now+ttl when nobody holds it, when its
	// holder's time ran out (expiry at or before now), or when holder holds it already (a
	// renewal), and reports whether holder holds it now.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error)
	// ReleaseLease gives the lease up if holder holds it (otherwise it does nothing).
	ReleaseLease(ctx context.Context, name, holder string) error
	// Lease says who holds the named lease and until when ("" and zero time when nobody has;
	// a lease that ran out still names its last holder, with its expiry in the past).
	Lease(ctx context.Context, name string) (holder string, expires time.Time, err error)

	Close() error
}

// Team is a group of users who share quotas and a budget.
type Team struct {
	Name string `json:"name"`
	// MaxGPUs and MaxNodes bound what the team's running runs hold at once (0: no bound).
	MaxGPUs  int `json:"max_gpus"`
	MaxNodes int `json:"max_nodes"`
	// MonthlyBudgetUSD bounds what the team's runs may be charged in a calendar month, UTC
	// (0: no budget).
	MonthlyBudgetUSD float64 `json:"monthly_budget_usd"`
	// MaxQueuedRuns bounds the team's queued runs (0: the server's default).
	MaxQueuedRuns int `json:"max_queued_runs"`
	// StoragePrefixes are where the team's runs may keep checkpoints and read warm starts from
	// (file:///DIR/ or s3://BUCKET/PREFIX/); none: only their own run folders. Each is at most
	// MaxTextBytes, without a newline; at most MaxStoragePrefixes.
	StoragePrefixes []string  `json:"storage_prefixes,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
}

// MaxStoragePrefixes bounds a team's storage prefixes.
const MaxStoragePrefixes = 64

// Ledger is what a team's admission decides on, read under the team's lock: the team, what its
// runs were charged in the month, and its active runs (queued, running and paused, oldest submission
// first).
type Ledger struct {
	Team   Team
	Spent  float64
	Active []Run
}

// Decision is what Decide writes: a run to create (ErrExists, ErrNotFound and ErrInvalid as
// CreateRun), and changes to queued runs: started (State Running, StartedAt), ended (an ended
// State, EndedAt, Message) or still queued with a new Message. Of those only State, StartedAt,
// EndedAt and Message are written, and only while the run is still queued: a run cancelled
// meanwhile stays cancelled. The Decision Decide returns lists in Queued only the changes
// written.
type Decision struct {
	Create *Run
	Queued []Run
}

// User is someone with a token. Only the token's SHA-256 is kept.
type User struct {
	Name      string    `json:"name"`
	Team      string    `json:"team"`
	Admin     bool      `json:"admin"`
	TokenHash []byte    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// RunState is where a run is in its life.
type RunState string

// Run states: queued until its team has the GPUs and nodes it needs, running while a driver
// drives it, then finished, failed or cancelled. A run an infrastructure fault stopped (a full
// disk, a checkpoint store down) is paused: it holds no nodes and spent no tries, and a resume
// queues it again.
const (
	Queued    RunState = "queued"
	Running   RunState = "running"
	Paused    RunState = "paused"
	Finished  RunState = "finished"
	Failed    RunState = "failed"
	Cancelled RunState = "cancelled"
)

// Ended says whether a run in state s is over.
func (s RunState) Ended() bool { return s == Finished || s == Failed || s == Cancelled }

// Settled says whether no driver drives a run in state s, nor will until someone acts: it has
// ended, or it is paused (what a follower of its logs or events waits for).
func (s RunState) Settled() bool { return s.Ended() || s == Paused }

// Run is one submitted spec and what became of it.
type Run struct {
	ID    string   `json:"id"`
	Team  string   `json:"team"`
	User  string   `json:"user"`
	Name  string   `json:"name"` // the experiment's name
	State RunState `json:"state"`
	// Priority orders the queue: higher first, then the earlier submission.
	Priority    int       `json:"priority"`
	SubmittedAt time.Time `json:"submitted_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	// Spec is the spec's bytes as submitted; Plan the plan report (JSON) the run was admitted
	// with.
	Spec []byte `json:"-"`
	Plan []byte `json:"-"`
	// PredictedCostUSD (at the spec's quantile) and PredictedJCTSeconds are the plan's.
	PredictedCostUSD    float64 `json:"predicted_cost_usd"`
	PredictedJCTSeconds float64 `json:"predicted_jct_s"`
	// GPUs and Nodes are what the plan holds at its peak: what the run counts against its
	// team's quotas while it runs.
	GPUs  int `json:"gpus"`
	Nodes int `json:"nodes"`
	// CostUSD is what the run has been charged so far.
	CostUSD float64 `json:"cost_usd"`
	// Dir is the run's state directory (journal, logs, checkpoints), under the server's root.
	Dir string `json:"-"`
	// Message says why a run failed or was cancelled, or why it waits.
	Message string `json:"message,omitempty"`
	// CancelRequested is set by a cancel; the server driving the run acts on it.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// RunFilter chooses runs: of one team when Team is set, in one of States when set, at most
// Limit (0: all).
type RunFilter struct {
	Team   string
	States []RunState
	Limit  int
}

// AuditEntry is one recorded action: a submission, a refusal, a cancel, an admin change.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	User   string    `json:"user"`
	Team   string    `json:"team"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// AuditFilter chooses audit entries.
type AuditFilter struct {
	Team  string
	Limit int
}
