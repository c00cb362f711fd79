package virtual

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// The world's providers pass spot notices on: the executor trains through them.
var _ executor.Noticer = (*Provider)(nil)

// Config is one run in virtual time.
type Config struct {
	Experiment *spec.Experiment
	Alloc      sim.Alloc
	ASHA       *sim.ASHAPlan // an ASHA job's plan, instead of Alloc
	// Journal is the run's journal file; a run is resumed from what it holds.
	Journal string
	RunID   string
	// Seed is what the world draws its latencies from (0: the spec's seed): other seeds are
	// other runs of the same job, same trials.
	Seed int64
	// Truth, when set, is the spec the world draws from instead of Experiment: a job whose real
	// latencies are not what its plan was made with (a slower cluster, a profile that was wrong),
	// for re-planning and budgets.
	Truth *spec.Experiment
	// Faults, when set, strike the run as they say; each crash is followed by a new driver that
	// resumes the run in the same world.
	Faults *Faults
	// Replan re-plans at syncs (executor.Config.Replan); MaxRetries, KeepNodes as there.
	Replan     bool
	MaxRetries int
	KeepNodes  bool
	// Sync fsyncs the journal as a live run does (off: a virtual run is redone in less time than
	// a crash of this machine takes to reboot).
	Sync bool
	// Log, Progress and Observe are the executor's (Log also hears of each crash and resume).
	Log      io.Writer
	Progress func(runstate.Status)
	// ProgressEvery is the executor's (0: its default).
	ProgressEvery time.Duration
	Observe       func(journal.Event)
	Live          func(snapshot func() *runstate.Snapshot) // handed each driver's snapshot in turn
	// WarmStart and Configurations are the executor's (an adaptive sampler's results of earlier
	// runs; configurations replayed instead of drawn).
	WarmStart      []search.Observation
	Configurations map[string]spec.Config
	// Bench, when set, is the benchmark objective the trainers report (instead of looking up the
	// one trainer.env names): the caller shares what a trained benchmark has trained.
	Bench *objective.Objective
}

// Outcome is what a virtual run did: the executor's result, and the world it ran in (its ground
// truth of billing, breaches and work done twice).
type Outcome struct {
	Result  *runstate.Result
	World   *World
	Drivers int           // drivers it took: 1 plus the crashes
	End     time.Duration // virtual time from the start to the end
	Events  int           // timers fired: how much happened
}

// maxDrivers bounds the resumes of one run: a schedule with more crashes is a broken schedule.
const maxDrivers = 100

// Run runs (or resumes) a run in virtual time with the unchanged executor, through the faults.
// It returns when the run finished, failed for a reason of its own, or ctx was cancelled.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	// A run resumed in a new world (a virtual run stopped, then resumed) goes on from its last
	// event, and the world names no node as one the journal knows.
	past, err := journal.ReadJournal(cfg.Journal)
	if err != nil {
		return nil, err
	}
	start := Epoch
	for _, e := range past {
		if e.At.After(start) {
			start = e.At
		}
	}
	s := clock.NewSim(start)
	seed := cfg.Seed
	if seed == 0 {
		seed = cfg.Experiment.Seed
	}
	truth := cfg.Truth
	if truth == nil {
		truth = cfg.Experiment
	}
	w, err := NewWorld(s, truth, seed, cfg.Faults)
	if err != nil {
		return nil, err
	}
	if cfg.Bench != nil {
		w.bench = cfg.Bench
	}
	for _, e := range past {
		var n int
		if e.Node != nil {
			if _, err := fmt.Sscanf(e.Node.ID, "v%d", &n); err == nil {
				w.created = max(w.created, n)
			}
		}
	}
	out := &Outcome{World: w}
	var runErr error
	seen := 0 // events observed: each driver replays the journal, and each event is passed on once
	simErr := s.Run(ctx, func(ctx context.Context) {
		for epoch := 0; epoch < maxDrivers; epoch++ {
			out.Drivers = epoch + 1
			dctx, die := clock.WithCancel(s, ctx)
			opts := journal.JournalOptions{Clock: s, NoSync: !cfg.Sync, Log: cfg.Log}
			if cfg.Faults != nil {
				opts.Wrap = cfg.Faults.Journal(w, epoch, die)
			}
			jr, past, err := journal.OpenJournalWith(cfg.Journal, opts)
			if err != nil {
				die()
				runErr = err
				return
			}
			if cfg.Faults != nil {
				cfg.Faults.Written(len(past))
			}
			p, rt := w.Driver(epoch)
			var observe func(journal.Event)
			if cfg.Observe != nil {
				n := 0
				observe = func(e journal.Event) {
					if n++; n > seen {
						seen = n
						cfg.Observe(e)
					}
				}
			}
			out.Result, runErr = executor.Run(dctx, executor.Config{Experiment: cfg.Experiment, Alloc: cfg.Alloc, ASHA: cfg.ASHA, Provider: p, Runtime: rt,
				Journal: jr, Past: past, RunID: cfg.RunID, TimeScale: 1, MaxRetries: cfg.MaxRetries, KeepNodes: cfg.KeepNodes,
				Replan: cfg.Replan, Clock: s, Log: cfg.Log, Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery, Observe: observe, Live: cfg.Live, WarmStart: cfg.WarmStart,
				Configurations: cfg.Configurations})
			jr.Close()
			crashed := w.isSevered(epoch)
			die()
			if !crashed {
				return
			}
			fmt.Fprintf(cfg.Log, "virtual: driver %d crashed at %s (%s); a new driver resumes the run\n",
				epoch+1, format.Clock(s.Now().Sub(Epoch).Seconds()), strings.ReplaceAll(fmt.Sprint(runErr), "\n", "; "))
		}
		runErr = fmt.Errorf("virtual: %d drivers crashed: the schedule never lets the run end", maxDrivers)
	})
	out.End, out.Events = s.Now().Sub(Epoch), s.Fired()
	if simErr != nil {
		return out, simErr
	}
	return out, runErr
}

func (w *World) isSevered(epoch int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.severed[epoch]
}
