package runstate_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// virtualJournal runs the job of spec file in virtual time, under the fault schedule of seed (0:
// none; driver crashes, lost nodes, failing launches), and returns its journal and plan.
func virtualJournal(t *testing.T, file string, seed int64, replan bool) (string, runstate.Plan) {
	t.Helper()
	exp, err := spec.Load(filepath.Join("../virtual/testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	cfg := virtual.Config{Experiment: exp, RunID: "snap", Replan: replan}
	if exp.Algorithm.IsASHA() {
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := planner.PlanASHA(context.Background(), exp, m)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ASHA = &res.Elastic.Plan
	} else {
		s, err := sim.For(exp)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := planner.Plan(context.Background(), exp, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Alloc = res.Best.Alloc
	}
	cfg.Journal = filepath.Join(t.TempDir(), "journal.jsonl")
	if seed != 0 {
		clean := cfg
		clean.Journal = filepath.Join(t.TempDir(), "clean.jsonl")
		out, err := virtual.Run(context.Background(), clean)
		if err != nil {
			t.Fatal(err)
		}
		events, err := journal.ReadJournal(clean.Journal)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults = virtual.Draw(seed, virtual.Scale{Records: len(events), Nodes: 4, Launches: len(events) / 4,
			Duration: out.End, Spot: exp.Cluster.Market == spec.MarketSpot})
	}
	if _, err := virtual.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Journal, runstate.Plan{Experiment: exp, Alloc: cfg.Alloc, ASHA: cfg.ASHA}
}

// marks are the journal's Mark after each of its records.
func marks(t *testing.T, path string) []journal.Mark {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.Mark
	var m journal.Mark
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n') + 1
		m.Size += int64(i)
		m.Records++
		m.CRC = crc32.Update(m.CRC, crc32.MakeTable(crc32.Castagnoli), b[:i])
		out = append(out, m)
		b = b[i:]
	}
	return out
}

func fold(t *testing.T, p runstate.Plan, events []journal.Event) *runstate.State {
	t.Helper()
	st, err := runstate.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		st.Apply(e)
	}
	return st
}

// For journals of real runs in virtual time (each kind of job, with driver crashes and faults):
// a state taken at any sync, written, loaded back and fed the rest of the journal is the state a
// fold of the whole journal is, field for field; and Resume, from that snapshot, returns the
// state and exactly the events after it.
func TestSnapshotAtEverySyncResumesAsTheWholeFold(t *testing.T) {
	jobs := []struct {
		file   string
		seed   int64
		replan bool
	}{
		{"campaign-sha.yaml", 0, true},
		{"campaign-sha.yaml", 7, true},
		{"campaign-spot.yaml", 3, false},
		{"campaign-tpe.yaml", 5, false},
		{"campaign-asha.yaml", 11, false},
	}
	for _, job := range jobs {
		t.Run(strings.TrimSuffix(job.file, ".yaml"), func(t *testing.T) {
			path, p := virtualJournal(t, job.file, job.seed, job.replan)
			events, err := journal.ReadJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			ms := marks(t, path)
			if len(ms) != len(events) {
				t.Fatalf("%d lines, %d events", len(ms), len(events))
			}
			whole := fold(t, p, events)
			points := 0
			for i, e := range events {
				// every sync, and for ASHA (which has none) every rung result: the points a
				// snapshot may be taken at
				if e.Ev != journal.EvSync && e.Ev != journal.EvDone {
					continue
				}
				points++
				prefix := fold(t, p, events[:i+1])
				b, err := prefix.EncodeSnapshot(ms[i])
				if err != nil {
					t.Fatal(err)
				}
				snap := runstate.SnapshotPath(path)
				if err := runstate.WriteSnapshot(snap, b); err != nil {
					t.Fatal(err)
				}
				loaded, m, err := runstate.LoadSnapshot(snap, p, nil)
				if err != nil {
					t.Fatal(err)
				}
				if m != ms[i] {
					t.Fatalf("record %d: the snapshot covers %+v, was given %+v", i+1, m, ms[i])
				}
				if d := runstate.DiffStates(loaded, prefix); d != "" {
					t.Fatalf("record %d (%s): the loaded state differs from the one written: %s", i+1, e.Ev, d)
				}
				for _, e := range events[i+1:] {
					loaded.Apply(e)
				}
				if d := runstate.DiffStates(loaded, whole); d != "" {
					t.Fatalf("record %d (%s): restored and fed the rest, the state differs from the whole fold: %s", i+1, e.Ev, d)
				}
				j, st, rest, err := runstate.Resume(path, p, journal.JournalOptions{NoSync: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if st == nil || len(rest) != len(events)-i-1 {
					t.Fatalf("record %d: Resume used the snapshot: %v, and returned %d events of the %d after it", i+1, st != nil, len(rest), len(events)-i-1)
				}
				if got := j.Mark(); got != ms[len(ms)-1] {
					t.Fatalf("the reopened journal stands at %+v, not its end %+v", got, ms[len(ms)-1])
				}
				j.Close()
			}
			if points < 2 {
				t.Fatalf("%d points to take a snapshot at", points)
			}
		})
	}
}
