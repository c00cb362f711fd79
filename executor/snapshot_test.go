package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
)

// A run with Config.Snapshot writes its state at syncs: what is left at the end folds the
// journal up to a sync. And a driver that died at any record after a sync,
// resumed from that sync's snapshot (runstate.Resume: the state, and only the records after
// it), ends as the clean run did: the same winner and survivors, no trial-stage done twice, no
// node left held.
func TestResumeFromSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for job := range 2 {
		text := randomJob(r, job == 1)
		exp := experiment(t, text)
		m, _ := sim.NewModel(exp)
		var gpus [][]int
		for _, b := range exp.Algorithm.Brackets() {
			var g []int
			for _, st := range b.Stages {
				g = append(g, min(st.Trials, 1+r.IntN(8)))
			}
			gpus = append(gpus, g)
		}
		alloc := m.Elastic(gpus)
		plan := runstate.Plan{Experiment: exp, Alloc: alloc, TimeScale: 1}
		clean := newHarness(t, text)
		clean.cfg.Alloc = alloc
		clean.cfg.Snapshot = runstate.SnapshotPath(clean.journal)
		_, cleanEvents, err := clean.run(t, context.Background())
		if err != nil {
			t.Fatalf("job %d: clean run: %v", job, err)
		}
		wantBest, wantSurv := outcome(t, cleanEvents)
		_, mark, err := runstate.LoadSnapshot(clean.cfg.Snapshot, plan, nil)
		if err != nil {
			t.Fatalf("job %d: the run's snapshot: %v", job, err)
		}
		if mark.Records == 0 || cleanEvents[mark.Records-1].Ev != journal.EvSync {
			t.Fatalf("job %d: the snapshot left folds %d records: not up to a sync", job, mark.Records)
		}

		whole, err := os.ReadFile(clean.journal)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(whole, []byte("\n"))
		lines = lines[:len(lines)-1]
		sync := 0 // the last sync before the prefix's end: where its snapshot was taken
		resumes := 0
		for p := 1; p < len(lines); p++ {
			if cleanEvents[p-1].Ev == journal.EvSync {
				sync = p
			}
			if sync == 0 || p%2 != 0 {
				continue
			}
			resumes++
			where := fmt.Sprintf("job %d, died after record %d of %d, snapshot at record %d", job, p, len(lines), sync)
			h := newHarness(t, text)
			h.cfg.Alloc = alloc
			h.cfg.Snapshot = runstate.SnapshotPath(h.journal)
			if err := os.WriteFile(h.journal, bytes.Join(lines[:p], nil), 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := runstate.New(plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range cleanEvents[:sync] {
				st.Apply(e)
			}
			snap, err := st.EncodeSnapshot(journal.Mark{Size: int64(len(bytes.Join(lines[:sync], nil))), Records: sync, CRC: crcOf(lines[:sync])})
			if err != nil {
				t.Fatal(err)
			}
			if err := runstate.WriteSnapshot(h.cfg.Snapshot, snap); err != nil {
				t.Fatal(err)
			}
			seedWorld(t, h, cleanEvents, p)
			var res *runstate.Result
			var runErr error
			h.within(t, context.Background(), func(ctx context.Context) {
				j, resumed, past, err := runstate.Resume(h.journal, plan, journal.JournalOptions{Clock: h.clock}, &h.log)
				if err != nil {
					t.Error(err)
					return
				}
				if resumed == nil || len(past) != p-sync {
					t.Errorf("%s: resumed from the snapshot: %v, with %d records after it (want %d)", where, resumed != nil, len(past), p-sync)
				}
				cfg := h.cfg
				cfg.Journal, cfg.Past, cfg.State = j, past, resumed
				res, runErr = executor.Run(ctx, cfg)
				j.Close()
			})
			events, err := journal.ReadJournal(h.journal)
			if err != nil {
				t.Fatal(err)
			}
			endsAsClean(t, where, h, res, runErr, events, wantBest, wantSurv)
		}
		if resumes < 3 {
			t.Fatalf("job %d: %d resumes", job, resumes)
		}
	}
}

// crcOf is the CRC-32C of lines, one after another: a journal prefix's, as journal.Mark has it.
func crcOf(lines [][]byte) uint32 {
	var c uint32
	for _, l := range lines {
		c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), l)
	}
	return c
}

// endsAsClean fails t unless a resumed run ended as its clean run did: finished, with the same
// winner and survivors, no trial-stage done twice, and no node left held.
func endsAsClean(t *testing.T, where string, h *harness, res *runstate.Result, err error, events []journal.Event, wantBest string, wantSurv map[[2]int]string) {
	t.Helper()
	if err != nil || !res.Finished {
		t.Fatalf("%s: resume: %v", where, err)
	}
	gotBest, gotSurv := outcome(t, events)
	if gotBest != wantBest || fmt.Sprint(gotSurv) != fmt.Sprint(wantSurv) {
		t.Fatalf("%s: best %s survivors %v; clean run: %s %v", where, gotBest, gotSurv, wantBest, wantSurv)
	}
	if twice := doneTwice(events); twice != "" {
		t.Fatalf("%s: %s done twice", where, twice)
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%s: %d nodes held after the run", where, h.provider.Held())
	}
}
