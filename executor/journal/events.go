package journal

import (
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Kind is what an event records: one of the Ev constants.
type Kind string

// Event kinds of the journal. What each one means for the run's state is written once, in
// package runstate's fold, which serves both the live run and the replay of a journal.
const (
	EvStart     Kind = "start"       // a run began: its ID and start time
	EvTrial     Kind = "trial"       // a trial was sampled
	EvNodeUp    Kind = "node_up"     // a node is held (billing from its RunningAt)
	EvNodeOff   Kind = "node_down"   // nodes were released (billing stops at At) or lost (Error "lost")
	EvInterrupt Kind = "interrupted" // nodes are being taken away (a notice: Draining) or are gone (spot): Error says how
	EvStage     Kind = "stage"       // a bracket's stage began
	EvLaunch    Kind = "launch"      // a trial's gang is being started (try Try)
	EvReport    Kind = "report"      // rank 0 reported (At: when it printed the line)
	EvDone      Kind = "done"        // the trial reached the stage's target
	EvFail      Kind = "fail"        // a try failed; GaveUp when no retry is left
	EvTimeout   Kind = "timeout"     // a gang ran past its budget and is being stopped
	EvSync      Kind = "sync"        // the stage's survivors (Keep)
	EvResume    Kind = "resume"      // a new driver took over: gangs of the old one are gone
	EvSpec      Kind = "spec"        // resume --spec changed the run's spec (Spec: its sha256)
	EvCancel    Kind = "cancel"      // the run was cancelled; resume refuses it without --force
	EvFinish    Kind = "finish"      // every bracket finished
	EvStop      Kind = "stop"        // the driver stopped short of the end (Error: why; Cause "paused": an infrastructure fault); resume carries on
	EvRequest   Kind = "request"     // a bracket asks the provider for Count nodes under Token, before it asks
	EvAnswer    Kind = "answer"      // the provider answered the request under Token (its nodes are journaled)
	EvReplan    Kind = "replan"      // bracket Bracket's plan from stage Stage on is Plan now (Reason: why; Before, After: forecasts)
	EvForecast  Kind = "forecast"    // before bracket Bracket's stage Stage, the run is forecast to end as After (the plan kept)
	EvPromote   Kind = "promote"     // ASHA handed out Trial's job at bracket Bracket's rung Stage (0: its start), up to Iter
	EvPhase     Kind = "phase"       // ASHA's plan entered phase Phase: GPUs are held from now on
)

// Event is one record of the journal.
type Event struct {
	Ev      Kind               `json:"ev"`
	At      time.Time          `json:"at"`
	RunID   string             `json:"run_id,omitempty"`
	Bracket int                `json:"bracket,omitempty"`
	Stage   int                `json:"stage,omitempty"`
	Phase   int                `json:"phase,omitempty"` // EvPhase: the phase of ASHA's plan entered
	Trial   string             `json:"trial,omitempty"`
	Try     int                `json:"try,omitempty"`
	GPUs    int                `json:"gpus,omitempty"`
	Iter    int                `json:"iter,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Metric  *float64           `json:"metric,omitempty"`
	Params  spec.Config        `json:"params,omitempty"`
	Node    *cloud.Node        `json:"node,omitempty"`
	Nodes   []string           `json:"nodes,omitempty"`
	Keep    []string           `json:"keep,omitempty"`
	Error   string             `json:"error,omitempty"`
	GaveUp  bool               `json:"gave_up,omitempty"`
	// Interrupted marks a fail event whose gang lost a node (a spot interruption, a node gone):
	// not the trial's failure, so it is not counted against its retries.
	Interrupted bool `json:"interrupted,omitempty"`
	// NotStarted marks a fail event whose gang the runtime could not start (no process ran the
	// trainer): what the infrastructure did, which says nothing of the trainer (failure rule).
	NotStarted bool `json:"not_started,omitempty"`
	// Draining marks an interrupted event whose nodes are still held: no longer used, they bill
	// until a node_down releases them (journals of before it stopped billing at the notice).
	Draining bool    `json:"draining,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
	// Began and Exited bound a launch on done and fail events: its workers held their GPUs from
	// Began to Exited (what per-function billing charges).
	Began  time.Time `json:"began,omitzero"`
	Exited time.Time `json:"exited,omitzero"`
	Spec   string    `json:"spec,omitempty"`
	// Count is how many nodes a request asks for. Journals of before it kept the count in Try;
	// decoding moves it here (upgrade).
	Count int `json:"count,omitempty"`
	// Token is a node request's idempotency key: journaled before the request, so that a driver
	// that died before the answer repeats the request under it and rents nothing twice.
	Token string `json:"token,omitempty"`
	// Market is the market a request asked for, when it is not its stage's own: a hedged stage
	// (sim.StageAlloc.OnDemand) asks for its on-demand nodes apart, and a request repeated after
	// a crash must ask the same market again. Empty: the stage's own.
	Market string `json:"market,omitempty"`
	// Tier is, on a node_up, "on-demand" for an on-demand node a hedged stage asked for (its
	// reliability tier), which is not a spot stage's fallback: a later spot stage does not keep
	// it in place of a spot node (as the simulator keeps nodes per market).
	Tier string `json:"tier,omitempty"`
	// Plan, Reason, Before and After describe a re-plan; GivesWay marks one that meets the
	// budget by missing the deadline.
	Plan     []sim.StageAlloc  `json:"plan,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	Before   *planner.Forecast `json:"before,omitempty"`
	After    *planner.Forecast `json:"after,omitempty"`
	GivesWay bool              `json:"deadline_gives_way,omitempty"`
	// Cause says why, as a word a program reads (Error says it for people): a node_down's
	// NodeCause, a stop's StopCause. Journals written before it have none: the fold infers it.
	Cause string `json:"cause,omitempty"`
	// Fault is, on a paused stop, what failed (an infra.Error's What: a full disk, a store
	// down), and Where the place that failed (a path, an s3:// URL). Journals of before Fault
	// kept it in Reason; decoding moves it here (Upgrade).
	Fault string `json:"fault,omitempty"`
	Where string `json:"where,omitempty"`
}

// NodeCause is why a node went.
type NodeCause string

// Why nodes go.
const (
	NodeReleased NodeCause = "released" // the run let it go: a scale-down, the run's end
	NodeLost     NodeCause = "lost"     // the provider no longer holds it
	NodeDrained  NodeCause = "drained"  // released once the gangs on it saved, after its interruption notice
	NodeOrphan   NodeCause = "orphan"   // rented by a driver that died before journaling it; released on resume
	NodeTaken    NodeCause = "taken"    // a spot node the market took (an interruption without a drain)
)

// StopCause is why a driver stopped short of the end.
type StopCause string

// Why drivers stop.
const (
	StopFailed      StopCause = "failed"      // an error it could not carry on from (Error says which)
	StopInterrupted StopCause = "interrupted" // told to stop (a signal, cancel): resume carries on
	StopBudget      StopCause = "budget"      // the forecast cost is over budget.max_cost_usd under budget.stop
	// StopPaused is an infrastructure fault (infra.Error: a full disk, a store down): no try was
	// spent; Fault says what failed and Where where; the nodes were released at the pause
	// (Nodes), unless --keep-nodes kept them. resume carries on once it recovers.
	StopPaused StopCause = "paused"
)
