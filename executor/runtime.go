package executor

import (
	"context"

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
}

// Runtime launches gangs.
//
// Error contract: Launch either starts every worker of the gang and returns a Handle, or starts
// none (stopping any it had started) and returns an error. The runtime restores the trial's
// checkpoint before the gang starts and saves it after the gang exits 0 or is stopped, with rank
// 0's last report beside it (trial.LastReportFile). When the restored checkpoint is at the
// gang's target already, nothing is trained: the kept report is delivered again and the gang
// ends at once (Reported), so a result outlives a driver that died before it journaled it.
type Runtime interface {
	Launch(ctx context.Context, g Gang) (Handle, error)
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
