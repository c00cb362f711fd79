package nomad

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/trial"
)

type handle struct {
	r       *Runtime
	job     string
	trial   string
	header  string // the gang's first line in the trial's log
	workers int
	target  int      // the iteration the gang trains to: its last report's, when it completes
	nodes   []string // each rank's node
	reports chan trial.Report
	exited  chan struct{}
	done    chan struct{}
	stop    chan struct{}
	once    sync.Once
	result  error

	mu       sync.Mutex
	lastIter int
}

func (h *handle) Reports() <-chan trial.Report { return h.reports }
func (h *handle) Exited() <-chan struct{}      { return h.exited }
func (h *handle) Wait() error                  { <-h.done; return h.result }

// Stop deregisters the job: Nomad sends SIGTERM to every worker's wrapper, which passes it on and
// kills the trainer after the grace period.
func (h *handle) Stop() {
	h.once.Do(func() { close(h.stop) })
}

// watch follows the job's allocations until all are terminal, streaming rank 0's reports; the
// first failure stops the rest of the gang. It then collects the logs and purges the job.
func (h *handle) watch() {
	defer close(h.done)
	jobs := h.r.Client.Jobs()
	stream, endStream := context.WithCancel(context.Background())
	defer endStream()
	var streaming sync.WaitGroup
	streamed := false
	stopped := false // Stop was asked for
	ending := false  // the job is deregistered: stopped, or a worker failed
	failed := ""     // the allocation that failed first
	lostNode := -1   // the rank whose node is being interrupted, when that ended the gang
	infraRank := -1  // the rank whose worker met an infrastructure fault (worker.ExitInfra)
	for {
		select {
		case <-h.stop:
			stopped = true
			if !ending {
				ending = true
				jobs.Deregister(h.job, false, nil)
			}
		default:
		}
		allocs, _, err := jobs.Allocations(h.job, true, nil)
		if err != nil {
			time.Sleep(h.r.poll())
			continue
		}
		for _, a := range allocs {
			if failed == "" && (a.ClientStatus == "failed" || a.ClientStatus == "lost") {
				failed = a.ID
				switch exitCode(a) {
				case worker.ExitInterrupted:
					lostNode = rankOf(a)
				case worker.ExitInfra:
					infraRank = rankOf(a)
				}
			}
			if !streamed && a.TaskGroup == "rank-0" && a.ClientStatus != "pending" {
				streamed = true
				streaming.Add(1)
				go func() {
					defer streaming.Done()
					h.parse(h.stream(stream, a, "stdout", true), nil, func(err error) {
						h.r.logf("trial %s: ignored a malformed report: %v", h.trial, err)
					})
				}()
			}
		}
		if failed != "" && !ending {
			ending = true
			if lostNode < 0 { // a gang is whole or not at all: stop the rest, saving nothing
				h.abort(allocs)
			} // else its node is going, not the gang failing: stopped as by Stop, rank 0 saves
			jobs.Deregister(h.job, false, nil)
		}
		if len(allocs) >= h.workers && terminal(allocs) == len(allocs) {
			endStream()
			streaming.Wait()
			why := h.collect(allocs, failed, !stopped && failed == "")
			switch {
			case stopped:
				h.result = gang.ErrStopped
			case lostNode >= 0 && lostNode < len(h.nodes):
				h.result = &gang.InterruptedError{Node: h.nodes[lostNode], Reason: notice(why)}
			case infraRank >= 0:
				h.result = infraFault(why, infraRank)
			case failed != "":
				h.result = fmt.Errorf("gang failed: %s", why)
			}
			jobs.Deregister(h.job, true, nil) // purge
			h.r.deleteSecrets(h.job)
			return
		}
		time.Sleep(h.r.poll())
	}
}

// infraFault is the infrastructure fault a worker exited worker.ExitInfra for, read from its
// error output ("infrastructure fault: WHAT at WHERE: ..."): no try of the trial's.
func infraFault(stderr string, rank int) *infra.Error {
	fault := &infra.Error{What: infra.StoreDown, Where: fmt.Sprintf("rank %d's node", rank), Err: fmt.Errorf("gang failed: %s", stderr)}
	for _, line := range strings.Split(stderr, "\n") {
		_, said, ok := strings.Cut(line, worker.InfraPrefix)
		if !ok {
			continue
		}
		for _, what := range []string{infra.DiskFull, infra.QuotaExceeded, infra.ReadOnly, infra.StoreDown} {
			if rest, ok := strings.CutPrefix(said, what+" at "); ok {
				where, _, _ := strings.Cut(rest, ": ")
				fault.What, fault.Where = what, where
			}
		}
	}
	return fault
}

// notice is the line of a worker's error output that says why its node is going, or all of it.
func notice(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if _, after, ok := strings.Cut(lines[i], "stopping the trainer: "); ok {
			return strings.TrimSpace(after)
		}
	}
	return strings.TrimSpace(stderr)
}

// exitCode is the exit code of an allocation's task, -1 when it has none (still running, lost).
func exitCode(a *nomad.AllocationListStub) int {
	if ts := a.TaskStates["trainer"]; ts != nil {
		for i := len(ts.Events) - 1; i >= 0; i-- {
			if ts.Events[i].Type == nomad.TaskTerminated {
				return ts.Events[i].ExitCode
			}
		}
	}
	return -1
}

// parse passes on the reports in the output read whose iteration is beyond the last one passed
// on, echoing the output to echo (when not nil).
func (h *handle) parse(out io.Reader, echo io.Writer, bad func(error)) {
	trial.ScanReports(out, echo, func(rep trial.Report) {
		h.mu.Lock()
		fresh := rep.Iter > h.lastIter
		if fresh {
			h.lastIter = rep.Iter
		}
		h.mu.Unlock()
		if fresh {
			h.reports <- rep
		}
	}, bad)
}
