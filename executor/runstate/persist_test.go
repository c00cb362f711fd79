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
func marks(t testing.TB, path string) []journal.Mark {
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

func fold(t testing.TB, p runstate.Plan, events []journal.Event) *runstate.State {
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
			prefix := fold(t, p, nil) // the fold so far
			points, dones := 0, 0
			for i, e := range events {
				prefix.Apply(e)
				// every sync, and every fifth result (ASHA has no syncs): where a snapshot may be taken
				if e.Ev == journal.EvDone {
					dones++
				}
				if e.Ev != journal.EvSync && (e.Ev != journal.EvDone || dones%5 != 0) {
					continue
				}
				points++
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
			resumes := 0
			for _, e := range events {
				if e.Ev == journal.EvResume {
					resumes++
				}
			}
			if points < 2 || (job.seed != 0) != (resumes > 0) {
				t.Fatalf("%d points to take a snapshot at; %d drivers resumed the run (fault seed %d)", points, resumes, job.seed)
			}
		})
	}
}

// A snapshot that does not match its journal or cannot be read is ignored, said to the log, and
// the journal is replayed whole: a journal cut back (repaired) or of another run, a snapshot of
// another plan, torn, damaged, of another format, or garbage.
func TestSnapshotThatDoesNotMatchIsIgnored(t *testing.T) {
	path, p := virtualJournal(t, "campaign-sha.yaml", 0, false)
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	ms := marks(t, path)
	at := 0
	for i, e := range events {
		if e.Ev == journal.EvSync {
			at = i + 1
			break
		}
	}
	good, err := fold(t, p, events[:at]).EncodeSnapshot(ms[at-1])
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := virtualJournal(t, "campaign-sha.yaml", 7, false)
	otherJournal, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x10; return b }
	for _, c := range []struct {
		name     string
		snapshot []byte
		journal  []byte // nil: the run's own
		plan     func(runstate.Plan) runstate.Plan
		says     string
	}{
		{"sound", good, nil, nil, ""},
		{"journal cut back before it", good, whole[:ms[at-2].Size], nil, "no longer begins"},
		{"journal of another run", good, otherJournal, nil, "no longer begins"},
		{"another plan", good, nil, func(p runstate.Plan) runstate.Plan { p.TimeScale = 2; return p }, "of another plan"},
		{"torn", good[:len(good)/2], nil, nil, "checksum mismatch"},
		{"damaged", flip(good, len(good)-3), nil, nil, "checksum mismatch"},
		{"another format", flip(good, 5), nil, nil, "not of this format"},
		{"garbage", bytes.Repeat([]byte("x"), 4096), nil, nil, "not of this format"},
		{"empty", []byte{}, nil, nil, "not of this format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			jpath := filepath.Join(dir, "journal.jsonl")
			body := whole
			if c.journal != nil {
				body = c.journal
			}
			if err := os.WriteFile(jpath, body, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(runstate.SnapshotPath(jpath), c.snapshot, 0o600); err != nil {
				t.Fatal(err)
			}
			want, err := journal.ReadJournal(jpath)
			if err != nil {
				t.Fatal(err)
			}
			plan := p
			if c.plan != nil {
				plan = c.plan(p)
			}
			var log strings.Builder
			j, st, rest, err := runstate.Resume(jpath, plan, journal.JournalOptions{NoSync: true}, &log)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if c.says == "" {
				if st == nil || len(rest) != len(want)-at || log.Len() > 0 {
					t.Fatalf("a sound snapshot: used %v, %d events after it (want %d), log %q", st != nil, len(rest), len(want)-at, log.String())
				}
				return
			}
			if st != nil || len(rest) != len(want) {
				t.Fatalf("used the snapshot: %v; %d events of the journal's %d", st != nil, len(rest), len(want))
			}
			if !strings.Contains(log.String(), c.says) || !strings.Contains(log.String(), "replayed whole") {
				t.Fatalf("log %q does not say %q and that the journal is replayed whole", log.String(), c.says)
			}
		})
	}
}
