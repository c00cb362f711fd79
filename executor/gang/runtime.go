package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Worker is one process of a gang: where it runs and what it is told.
type Worker struct {
	Node cloud.Node
	Env  trial.Env
}

// Gang is one TRAIN run of one trial: all its workers, started together or not at all.
type Gang struct {
	Trial   string
	Command []string
	// Image, when set, runs the trainer as a container (runtimes that support it).
	Image string
	// Env is the trainer's own environment from the spec; the contract's variables come from
	// each worker's Env.
	Env     map[string]string
	Workers []Worker
	// CPUMHz and MemoryMB size each worker for a cluster scheduler.
	CPUMHz, MemoryMB int
	// Timeout is the launch's budget: the driver stops the gang past it. Runtimes whose workers
	// can outlive the driver pass it on, so that a worker left alone stops by itself.
	Timeout time.Duration
	// Reuse says the trainer may serve several trials in one process (spec trainer.reuse):
	// runtimes that can keep a single worker's process between launches do.
	Reuse bool
	// Dir is the folder the trainer runs in (spec trainer.workdir, resolved; a server's run: its
	// unpacked code): relative paths in Command resolve there. Empty: the driver's own.
	Dir string
}

// Runtime launches gangs. gang/gangtest is this contract as a test suite, run over every
// runtime.
//
// Error contract: Launch either starts every worker of the gang and returns a Handle, or starts
// none (stopping any it had started) and returns an error. A gang that cannot be placed whole on
// the nodes its workers name (a node unknown or gone, a node too small for the workers' resources,
// or one still busy when the runtime's placement timeout ends) fails in Launch, within a bounded
// time, with an error wrapping ErrUnplaceable that says why: no worker of it is left running and
// nothing waits for capacity unboundedly, so the executor can re-place the gang. (The process
// runtime runs every worker on this machine and has no such case.)
//
// Once started, a worker's failure (a nonzero exit, a lost node) stops the rest of the gang and
// is what Wait returns. The runtime restores the trial's checkpoint before the gang starts and
// saves it after the gang exits 0 or is stopped (whatever the exit codes then), never after a
// failure, with rank 0's last report beside it (trial.LastReportFile). When the restored
// checkpoint is at the gang's target already, nothing is trained: the kept report is delivered
// again and the gang ends at once (Reported), so a result outlives a driver that died before it
// journaled it. Every worker's standard output and error end up in the runtime's log of the
// trial (LogDir/<trial>.log for the process and Nomad runtimes).
type Runtime interface {
	Launch(ctx context.Context, g Gang) (Handle, error)
}

// ErrStopped is what Handle.Wait returns for a gang stopped on purpose.
var ErrStopped = errors.New("gang stopped")

// ErrUnplaceable is wrapped by the error of a Launch whose gang cannot be placed whole.
var ErrUnplaceable = errors.New("gang cannot be placed")

// InterruptedError is what Wait returns when a gang ended because a node it ran on is being
// taken away (a spot interruption notice): its workers were stopped as by Stop, so the
// checkpoint of what they reached is saved. The executor replaces the node and relaunches the
// gang; the try does not count against the trial's retries.
type InterruptedError struct {
	Node   string // the node going away
	Reason string // what its worker was told (the notice)
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("node %s is being interrupted (%s): the gang was stopped and its checkpoint saved", e.Node, e.Reason)
}

// Handle follows a running gang.
type Handle interface {
	// Reports delivers rank 0's reports as they are printed; it is closed when the gang ends.
	Reports() <-chan trial.Report
	// Exited is closed once every worker has ended: the gang's GPUs are free, though its
	// checkpoint may still be on its way to the store.
	Exited() <-chan struct{}
	// Wait blocks until every worker has ended and the checkpoint is saved: nil when all exited
	// 0, ErrStopped after Stop, else the first failure.
	Wait() error
	// Stop sends SIGTERM to every worker, and SIGKILL after the grace period.
	Stop()
}

// Reaper is implemented by runtimes whose gangs can outlive a driver that died (local
// processes): Reap ends every gang an earlier driver started, before a resumed run relaunches
// them from their checkpoints.
type Reaper interface {
	Reap(ctx context.Context) error
}

// Reported is the Handle of a gang that had nothing to train: its checkpoint was at the target
// already. It delivers the checkpoint's kept report and has ended.
func Reported(r trial.Report) Handle {
	reports := make(chan trial.Report, 1)
	reports <- r
	close(reports)
	exited := make(chan struct{})
	close(exited)
	return reportedHandle{reports: reports, exited: exited}
}

type reportedHandle struct {
	reports chan trial.Report
	exited  chan struct{}
}

func (h reportedHandle) Reports() <-chan trial.Report { return h.reports }
func (h reportedHandle) Exited() <-chan struct{}      { return h.exited }
func (h reportedHandle) Wait() error                  { return nil }
func (h reportedHandle) Stop()                        {}

var _ Handle = reportedHandle{}
