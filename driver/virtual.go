package driver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// VirtualRunID names a virtual run: from its spec's seed and its fault schedule's, so that the
// same command twice writes the same journal.
func VirtualRunID(exp *spec.Experiment, faults int64) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d/%d", exp.Name, exp.Seed, faults)
	return journal.NewRunID(virtual.Epoch, h.Sum32())
}

// openVirtual is a fresh world's provider and runtime, for what runs outside a virtual run's own
// command (cancel): a world that holds nothing.
func openVirtual(ctx context.Context, t target) (*Backend, error) {
	w, err := virtual.NewWorld(clock.NewSim(virtual.Epoch), t.exp, t.exp.Seed, nil)
	if err != nil {
		return nil, err
	}
	p, r := w.Driver(0)
	return &Backend{Provider: p, Runtime: r}, nil
}

// Faults is a fault schedule and what it is held to: the clean run's winner.
type Faults struct {
	Schedule *virtual.Faults
	Best     *runstate.BestTrial // the clean run's
}

// DrawFaults draws the fault schedule of seed for the run in st: a clean run of it first, in
// virtual time on a scratch journal, says how many journal records, nodes and launches there
// are to place faults among, and which trial must win.
func DrawFaults(ctx context.Context, st *rundir.State, seed int64) (*Faults, error) {
	out, err := cleanRun(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("the clean run the faults are placed in: %w", err)
	}
	events := out.events
	scale := virtual.Scale{Records: len(events), Duration: time.Duration(out.Result.Realized.JCT * float64(time.Second)),
		Spot: st.Exp.Cluster.Market == spec.MarketSpot || strings.Contains(fmt.Sprint(st.Exp.Cluster.Markets), spec.MarketSpot)}
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			scale.Nodes++
		case journal.EvLaunch:
			scale.Launches++
		}
	}
	return &Faults{Schedule: virtual.Draw(seed, scale), Best: out.Result.Best}, nil
}

// cleanOutcome is a clean virtual run of a run's spec and plan, with its journal.
type cleanOutcome struct {
	*virtual.Outcome
	events []journal.Event
}

// cleanRun runs the run in st in virtual time without faults on a scratch journal, its adaptive
// sampler's trials given configs where they hold them.
func cleanRun(ctx context.Context, st *rundir.State, configs map[string]spec.Config) (*cleanOutcome, error) {
	scratch, err := os.MkdirTemp("", "rubberband-clean-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	path := filepath.Join(scratch, rundir.Journal)
	out, err := virtual.Run(ctx, virtual.Config{Experiment: st.Exp, Alloc: st.Alloc, ASHA: st.ASHA, Journal: path, RunID: st.Run.RunID, Replan: !st.Run.NoReplan,
		Configurations: configs})
	if err != nil {
		return nil, err
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		return nil, err
	}
	return &cleanOutcome{out, events}, nil
}

// executeVirtual runs (or resumes) a virtual run: the executor in virtual time, each crash of
// the fault schedule followed by a new driver in the same world. Its winner is held to the
// clean run's.
func executeVirtual(ctx context.Context, st *rundir.State, o Options, log *Log, cfg executor.Config) (*runstate.Result, error) {
	vc := virtual.Config{Experiment: st.Exp, Alloc: st.Alloc, ASHA: st.ASHA, Journal: filepath.Join(st.Dir, rundir.Journal), RunID: st.Run.RunID,
		Replan: cfg.Replan, KeepNodes: cfg.KeepNodes, Log: log, Progress: cfg.Progress, Live: cfg.Live, WarmStart: cfg.WarmStart}
	var f *Faults
	if o.Faults != nil {
		var err error
		if f, err = DrawFaults(ctx, st, *o.Faults); err != nil {
			return nil, err
		}
		vc.Faults = f.Schedule
		log.Note("faults (seed %d): %s", f.Schedule.Seed, f.Schedule)
		fmt.Fprintf(o.Log, "faults (seed %d): %s\n", f.Schedule.Seed, f.Schedule)
	}
	start := time.Now()
	out, err := virtual.Run(ctx, vc)
	if out != nil {
		fmt.Fprintf(o.Log, "virtual: %s of virtual time in %s of wall time, %d driver(s)\n", format.Clock(out.End.Seconds()), time.Since(start).Round(time.Millisecond), out.Drivers)
		if f != nil {
			for _, what := range out.World.Triggered() {
				fmt.Fprintf(o.Log, "  fault: %s\n", what)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if out.Result.Finished {
		if f != nil && st.Exp.Sampler.Adaptive() {
			// Faults shift when an adaptive sampler draws, so what it learns from: the run is
			// held to a clean run of the configurations it drew.
			events, err := journal.ReadJournal(vc.Journal)
			if err != nil {
				return out.Result, err
			}
			pinned, err := cleanRun(ctx, st, journal.Configurations(events))
			if err != nil {
				return out.Result, fmt.Errorf("the clean run of the configurations drawn: %w", err)
			}
			f.Best = pinned.Result.Best
		}
		if f != nil && st.ASHA != nil {
			// ASHA promotes as results arrive, and faults shift when they arrive: the run is
			// held to the promotion rule over its own results instead of a clean run's winner.
			if err := heldToTheRule(st, vc.Journal, out.Result); err != nil {
				return out.Result, fmt.Errorf("%w (replay: --faults %d): %v", ErrFaultsChangedTheRun, f.Schedule.Seed, err)
			}
			f.Best = nil
		}
		if err := heldToTheCleanRun(out, f); err != nil {
			return out.Result, err
		}
	}
	return out.Result, nil
}

// heldToTheRule audits an ASHA run's journal (runstate.VerifyASHA) and its winner.
func heldToTheRule(st *rundir.State, journalPath string, res *runstate.Result) error {
	events, err := journal.ReadJournal(journalPath)
	if err != nil {
		return err
	}
	best, err := runstate.VerifyASHA(st.Exp, events)
	if err != nil {
		return err
	}
	if res.Best == nil || res.Best.Trial != best {
		return fmt.Errorf("the winner is %s, the rule's over the run's results %s", bestName(res.Best), best)
	}
	return nil
}

// ErrFaultsChangedTheRun is what a virtual run with faults ends with when they changed what a
// clean run would have done: a bug of the run path, replayed by the schedule's seed.
var ErrFaultsChangedTheRun = errors.New("the faults changed the run")

// heldToTheCleanRun checks a finished virtual run against the world's truth and, with faults,
// the clean run: the same winner, nothing done twice, nothing left billing, no breach.
func heldToTheCleanRun(out *virtual.Outcome, f *Faults) error {
	var why []string
	if b := out.World.Breaches(); len(b) > 0 {
		why = append(why, "the runtime contract was broken: "+strings.Join(b, "; "))
	}
	if twice := out.World.TrainedTwice(); len(twice) > 0 {
		why = append(why, "work done twice: "+strings.Join(twice, ", "))
	}
	if held := out.World.Held(); len(held) > 0 {
		why = append(why, fmt.Sprintf("%d node(s) left billing", len(held)))
	}
	if f != nil && f.Best != nil {
		if got := out.Result.Best; got == nil || got.Trial != f.Best.Trial || got.Metric != f.Best.Metric {
			why = append(why, fmt.Sprintf("the winner is %v, the clean run's %s (%v)", bestName(got), f.Best.Trial, f.Best.Metric))
		}
	}
	if len(why) == 0 {
		return nil
	}
	replay := ""
	if f != nil {
		replay = fmt.Sprintf(" (replay: --faults %d)", f.Schedule.Seed)
	}
	return fmt.Errorf("%w%s: %s", ErrFaultsChangedTheRun, replay, strings.Join(why, "; "))
}

func bestName(b *runstate.BestTrial) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprintf("%s (%v)", b.Trial, b.Metric)
}
