package executor_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/infra"
)

// A gang that ends with an infrastructure fault (its checkpoint could not be saved: the disk is
// full) spends no try: the run pauses, journals what failed and where, releases its nodes at
// the pause (nothing bills past it) and returns a PausedError. Resumed once the fault is mended,
// it ends with the clean run's winner, still without a failed try.
func TestInfraFaultPauses(t *testing.T) {
	clean := newHarness(t, shaSpec)
	_, cleanEvents, err := clean.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := outcome(t, cleanEvents)

	h := newHarness(t, shaSpec)
	full := &infra.Error{What: infra.DiskFull, Where: "/ckpt", Err: syscall.ENOSPC}
	mended := false
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		if g.Workers[0].Env.TargetIter > 1 && !mended { // the second stage's gangs: the disk is full
			return fake.Behavior{Err: full}
		}
		return fake.Behavior{}
	}
	_, events, err := h.run(t, context.Background())
	var paused *executor.PausedError
	if !errors.As(err, &paused) || paused.Fault != full || !paused.Journaled || paused.Kept || len(paused.Released) == 0 {
		t.Fatalf("run: %v (%+v), want a journaled pause that released its nodes", err, paused)
	}
	stop := events[len(events)-1]
	if stop.Ev != journal.EvStop || stop.Cause != string(journal.StopPaused) || stop.Fault != infra.DiskFull || stop.Where != "/ckpt" {
		t.Fatalf("last event %+v, want a paused stop naming the disk", stop)
	}
	for _, e := range events {
		if e.Ev == journal.EvFail {
			t.Fatalf("a try was spent on the full disk: %+v", e)
		}
		if e.Ev == journal.EvNodeOff && e.At.After(stop.At) {
			t.Fatalf("a node billed past the pause: %+v", e)
		}
	}
	if n := h.provider.Held(); n != 0 {
		t.Fatalf("%d nodes held after the pause", n)
	}

	mended = true
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("resume: %v", err)
	}
	if got, _ := outcome(t, events); got != want {
		t.Fatalf("resumed winner %s, clean winner %s", got, want)
	}
	for _, e := range events {
		if e.Ev == journal.EvFail {
			t.Fatalf("a try was spent: %+v", e)
		}
	}
}

// brokenJournal fails every write once broken is set, as a journal on a full disk does.
type brokenJournal struct {
	*os.File
	broken *bool
}

func (b brokenJournal) Write(p []byte) (int, error) {
	if *b.broken {
		return 0, &os.PathError{Op: "write", Path: b.Name(), Err: syscall.ENOSPC}
	}
	return b.File.Write(p)
}

// A journal that cannot be written stops the driver without deciding anything more: no node is
// released unjournaled (they are kept, and bill, until a resumed driver journals their
// release), and the error says so. Resumed once the disk has room, the run ends as a clean one.
func TestJournalFaultStopsWithoutActing(t *testing.T) {
	h := newHarness(t, shaSpec)
	broken := false
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		if g.Workers[0].Env.TargetIter > 1 {
			broken = true // the disk fills as the second stage runs
		}
		return fake.Behavior{}
	}
	var runErr error
	h.within(t, context.Background(), func(ctx context.Context) {
		j, past, err := journal.OpenJournalWith(h.journal, journal.JournalOptions{Clock: h.clock,
			Wrap: func(f journal.JournalFile) journal.JournalFile { return brokenJournal{f.(*os.File), &broken} }})
		if err != nil {
			t.Error(err)
			return
		}
		cfg := h.cfg
		cfg.Journal, cfg.Past = j, past
		_, runErr = executor.Run(ctx, cfg)
		j.Close()
	})
	var paused *executor.PausedError
	if !errors.As(runErr, &paused) || paused.Journaled || !paused.Kept || paused.Fault.What != infra.JournalBroken || !errors.Is(runErr, syscall.ENOSPC) {
		t.Fatalf("run: %v (%+v), want a pause that kept its nodes and journaled nothing", runErr, paused)
	}
	if h.provider.Held() == 0 {
		t.Fatal("nodes were released though the journal could not say so")
	}
	broken = false
	h.runtime.Behave = nil
	res, _, err := h.run(t, context.Background())
	if err != nil || !res.Finished || h.provider.Held() != 0 {
		t.Fatalf("resume: %v; %d nodes held", err, h.provider.Held())
	}
}
