package virtual_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// campaign is how many fault schedules TestFaultCampaign runs in all (make soak runs 100,000).
// 2,500 under make test: at 6,000 it took 317 s of CI's 1,042 s (2 cores, a suite grown past its
// 15-minute bound); each schedule is seeded, so the soak's 100,000 include these.
var campaign = flag.Int("campaign", 2_500, "fault schedules of TestFaultCampaign, over its jobs")

// campaignJobs are the specs the campaign strikes, with their share of the schedules.
var campaignJobs = []struct {
	file   string
	share  float64
	replan bool
}{
	{"testdata/campaign-sha.yaml", 0.5, true},
	{"testdata/campaign-spot.yaml", 0.3, false},
	{"testdata/campaign-tpe.yaml", 0.15, false},
	{"testdata/campaign-asha.yaml", 0.04, false},
	{"testdata/campaign-asha.yaml", 0.01, true}, // its reviews cost: a schedule takes 14 times as long
}

// The fault campaign: for each job, a clean run in virtual time, then thousands of seeded fault
// schedules — the driver crashing at any journal record (whole or torn) and resumed by a new one
// in the same world, nodes lost, spot notices, launches that fail, trainers that crash or hang —
// each of which must end as the clean run did (for the tpe job, a clean run of the configurations
// the schedule's run drew: faults shift when it draws, so what it learns from, never what a
// trial is once drawn): the same winner with the same metric, no
// trial-stage done twice (in the journal or in the world), every node released, every node's
// billing in the journal as the world billed it, and no breach of the runtime contract. A
// failing schedule names the seed and the command that replays it.
func TestFaultCampaign(t *testing.T) {
	total := *campaign
	if testing.Short() {
		total /= 10
	}
	for _, job := range campaignJobs {
		t.Run(filepath.Base(job.file), func(t *testing.T) {
			base := planned(t, job.file)
			exp := base.Experiment
			clean, cleanJCT := runOnce(t, base, nil, job.replan)
			scale := virtual.Scale{Records: len(clean.events), Nodes: clean.nodes, Launches: executorLaunches(clean.events),
				Duration: cleanJCT, Spot: exp.Cluster.Market == spec.MarketSpot}
			n := int(math.Round(float64(total) * job.share))
			start := time.Now()
			var done, faulted atomic.Int64
			var failMu sync.Mutex
			var failures []string
			seeds := make(chan int64)
			var wg sync.WaitGroup
			for range runtime.GOMAXPROCS(0) {
				wg.Add(1)
				dir := fastDir(t) // one per worker, emptied between schedules
				go func() {
					defer wg.Done()
					for seed := range seeds {
						f := virtual.Draw(seed, scale)
						why := strike(dir, base, f, clean, job.replan, seed%50 == 0)
						if why != "" {
							failMu.Lock()
							no := "--no-replan "
							if job.replan {
								no = ""
							}
							failures = append(failures, fmt.Sprintf("seed %d (%s): %s\n    replay: rubberband run --backend virtual executor/virtual/%s %s--faults %d",
								seed, f, why, job.file, no, seed))
							failMu.Unlock()
						}
						if f.String() != "no faults" {
							faulted.Add(1)
						}
						done.Add(1)
					}
				}()
			}
			for seed := int64(1); seed <= int64(n); seed++ {
				failMu.Lock()
				stop := len(failures) >= 5
				failMu.Unlock()
				if stop {
					break
				}
				seeds <- seed
			}
			close(seeds)
			wg.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			t.Logf("%d schedules (%d with faults) in %s: clean run %d records, %d nodes, %d launches, JCT %s, best %s",
				done.Load(), faulted.Load(), time.Since(start).Round(time.Millisecond), scale.Records, scale.Nodes, scale.Launches, cleanJCT, clean.best)
		})
	}
}

// cleanRun is what the campaign holds every schedule to.
type cleanRun struct {
	events []journal.Event
	best   string
	metric float64
	nodes  int
}

// planned is a campaign job's spec and plan: an ASHA job's GPU schedule, another's stages.
func planned(t testing.TB, file string) virtual.Config {
	if exp, err := spec.Load(file); err == nil && exp.Algorithm.IsASHA() {
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := planner.PlanASHA(context.Background(), exp, m)
		if err != nil {
			t.Fatal(err)
		}
		return virtual.Config{Experiment: exp, ASHA: &res.Elastic.Plan}
	}
	exp, alloc, _ := plan(t, file)
	return virtual.Config{Experiment: exp, Alloc: alloc}
}

// with is a campaign run of a job: its plan, the journal at path, faults, re-planning.
func with(base virtual.Config, path string, f *virtual.Faults, replan bool) virtual.Config {
	return virtual.Config{Experiment: base.Experiment, Alloc: base.Alloc, ASHA: base.ASHA, Journal: path, RunID: "campaign", Faults: f, Replan: replan}
}

func runOnce(t testing.TB, base virtual.Config, f *virtual.Faults, replan bool) (cleanRun, time.Duration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	out, err := virtual.Run(context.Background(), with(base, path, f, replan))
	if err != nil || !out.Result.Finished || out.Result.Best == nil {
		t.Fatalf("clean run: %v", err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	c := cleanRun{events: events, best: out.Result.Best.Trial, metric: out.Result.Best.Metric}
	for _, e := range events {
		if e.Ev == journal.EvNodeUp {
			c.nodes++
		}
	}
	return c, time.Duration(out.Result.Realized.JCT * float64(time.Second))
}

// strike runs one schedule and says what went wrong, "" when nothing did; twice, it runs the
// schedule again and holds it to the same journal, byte for byte.
func strike(dir string, base virtual.Config, f *virtual.Faults, clean cleanRun, replan, twice bool) string {
	defer empty(dir)
	exp, alloc := base.Experiment, base.Alloc
	path := filepath.Join(dir, "journal.jsonl")
	var log strings.Builder
	cfg := with(base, path, f, replan)
	cfg.Log = &log
	out, err := virtual.Run(context.Background(), cfg)
	if twice && err == nil {
		again := filepath.Join(dir, "again.jsonl")
		f2 := virtual.Draw(f.Seed, f.Scale())
		if _, err := virtual.Run(context.Background(), with(base, again, f2, replan)); err != nil {
			return fmt.Sprintf("the same schedule again failed: %v", err)
		}
		a, _ := os.ReadFile(path)
		b, _ := os.ReadFile(again)
		if !bytes.Equal(a, b) {
			return fmt.Sprintf("the same schedule twice wrote different journals (%d and %d bytes)", len(a), len(b))
		}
	}
	if err != nil {
		return fmt.Sprintf("the run failed: %v (faults did: %s)", err, strings.Join(out.World.Triggered(), "; "))
	}
	res := out.Result
	if !res.Finished || res.Best == nil {
		return "the run did not finish"
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		return err.Error()
	}
	if exp.Sampler.Adaptive() {
		pinned, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: filepath.Join(dir, "pinned.jsonl"),
			RunID: "campaign", Replan: replan, Configurations: journal.Configurations(events)})
		if err != nil || pinned.Result.Best == nil {
			return fmt.Sprintf("the clean run of the schedule's configurations: %v", err)
		}
		clean.best, clean.metric = pinned.Result.Best.Trial, pinned.Result.Best.Metric
	}
	if exp.Algorithm.IsASHA() {
		// ASHA promotes as results arrive: faults that shift when they arrive shift what is
		// promoted. What must hold is the rule (every promotion the rule's, none twice, the
		// winner the rule's over the results as they came) and the results themselves (a
		// trial's metric at a rung is the clean run's).
		best, err := runstate.VerifyASHA(exp, events)
		if err != nil {
			return err.Error()
		}
		if res.Best.Trial != best {
			return fmt.Sprintf("winner %s, the rule's %s", res.Best.Trial, best)
		}
		if why := sameResults(clean.events, events); why != "" {
			return why
		}
		clean.best, clean.metric = res.Best.Trial, res.Best.Metric
	}
	if res.Best.Trial != clean.best || res.Best.Metric != clean.metric {
		return fmt.Sprintf("winner %s (%v), the clean run's %s (%v)", res.Best.Trial, res.Best.Metric, clean.best, clean.metric)
	}
	if twice := doneTwice(events); twice != "" {
		return "journaled done twice: " + twice
	}
	if twice := out.World.TrainedTwice(); len(twice) > 0 {
		return "trained twice: " + strings.Join(twice, ", ")
	}
	if b := out.World.Breaches(); len(b) > 0 {
		return "breaches: " + strings.Join(b, "; ")
	}
	if held := out.World.Held(); len(held) > 0 {
		return fmt.Sprintf("%d nodes left held", len(held))
	}
	if why := billedAsTheWorld(events, out.World.Spans()); why != "" {
		return why
	}
	return ""
}

// sameResults names a trial whose result at a stage differs from the clean run's.
func sameResults(clean, events []journal.Event) string {
	want := map[string]float64{}
	for _, e := range clean {
		if e.Ev == journal.EvDone && e.Metric != nil {
			want[fmt.Sprintf("%s stage %d", e.Trial, e.Stage)] = *e.Metric
		}
	}
	for _, e := range events {
		k := fmt.Sprintf("%s stage %d", e.Trial, e.Stage)
		if w, ok := want[k]; ok && e.Ev == journal.EvDone && (e.Metric == nil || *e.Metric != w) {
			return fmt.Sprintf("%s: result %v, the clean run's %v", k, e.Metric, w)
		}
	}
	return ""
}

// fastDir is a directory for many small journals: in memory (/dev/shm) where there is one, as
// a journal's syscalls are most of a schedule's time on disk.
func fastDir(t *testing.T) string {
	if dir, err := os.MkdirTemp("/dev/shm", "rb-campaign-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return t.TempDir()
}

// empty removes what a schedule left in dir: its journal and their backups.
func empty(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

// billedAsTheWorld checks every node's billing in the journal against the world's: the same
// nodes, each from the same start, each to the same end — but for nodes the world took away
// (lost, interrupted), whose end the driver learns a little before or after.
func billedAsTheWorld(events []journal.Event, spans []virtual.NodeSpan) string {
	type span struct{ start, end time.Time }
	journaled := map[string]*span{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			journaled[e.Node.ID] = &span{start: e.Node.RunningAt}
		case journal.EvNodeOff, journal.EvInterrupt:
			if e.Draining {
				continue // held and billing until released
			}
			for _, id := range e.Nodes {
				if s := journaled[id]; s != nil && s.end.IsZero() {
					s.end = e.At
				}
			}
		}
	}
	for _, w := range spans {
		j := journaled[w.Node]
		switch {
		case j == nil:
			return fmt.Sprintf("node %s billed by the world (%s to %s) is not in the journal", w.Node, w.RunningAt.Sub(virtual.Epoch), w.End.Sub(virtual.Epoch))
		case !j.start.Equal(w.RunningAt):
			return fmt.Sprintf("node %s: the journal bills it from %s, the world from %s", w.Node, j.start.Sub(virtual.Epoch), w.RunningAt.Sub(virtual.Epoch))
		case j.end.IsZero():
			return fmt.Sprintf("node %s: the journal never stops billing it", w.Node)
		case w.Why == "released" && !j.end.Equal(w.End):
			return fmt.Sprintf("node %s: the journal bills it to %s, the world to its release at %s", w.Node, j.end.Sub(virtual.Epoch), w.End.Sub(virtual.Epoch))
		}
		delete(journaled, w.Node)
	}
	for id := range journaled {
		return fmt.Sprintf("node %s is in the journal but the world never billed it", id)
	}
	return ""
}

func executorLaunches(events []journal.Event) int {
	n := 0
	for _, e := range events {
		if e.Ev == journal.EvLaunch {
			n++
		}
	}
	return n
}

// doneTwice names a trial-stage journaled done more than once.
func doneTwice(events []journal.Event) string {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Ev != journal.EvDone {
			continue
		}
		k := fmt.Sprintf("%s stage %d", e.Trial, e.Stage)
		if seen[k] {
			return k
		}
		seen[k] = true
	}
	return ""
}
