package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// shaSpec is a small SHA job for the fakes: 8 trials, 3 stages, 2 GPUs per node.
const shaSpec = `
name: unit
deadline: 1h
seed: 3
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [train]}
cluster:
  gpus_per_node: 2
  price_per_hour: 3.6
  scale_latency: {value: 0s}
  init_latency: {value: 0s}
  max_nodes: 4
profile:
  iter_latency: {1: {mean: 1}}
`

func experiment(t testing.TB, text string) *spec.Experiment {
	t.Helper()
	exp, err := spec.Parse("unit.yaml", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// elastic gives every stage one GPU per trial (at most 8), as nodes of the spec's size.
func elastic(t testing.TB, exp *spec.Experiment) sim.Alloc {
	t.Helper()
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	var gpus [][]int
	for _, b := range exp.Algorithm.Brackets() {
		var g []int
		for _, st := range b.Stages {
			g = append(g, min(st.Trials, 8))
		}
		gpus = append(gpus, g)
	}
	return m.Elastic(gpus)
}

// epoch is where the harness's virtual time starts.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// harness runs the executor over the fakes in virtual time: a Sim drives the run, its gangs and
// its timers, so that nothing waits on the wall clock and every run is the same.
type harness struct {
	cfg      executor.Config
	clock    *clock.Sim
	provider *fake.Provider
	runtime  *fake.Runtime
	journal  string
	log      syncio.Buffer
}

func newHarness(t testing.TB, text string) *harness {
	t.Helper()
	exp := experiment(t, text)
	s := clock.NewSim(epoch)
	h := &harness{clock: s, provider: &fake.Provider{Clock: s, GPUsPerNode: exp.Cluster.GPUsPerNode}, runtime: &fake.Runtime{Clock: s},
		journal: filepath.Join(t.TempDir(), "journal.jsonl")}
	h.cfg = executor.Config{Experiment: exp, Alloc: elastic(t, exp), Provider: h.provider, Runtime: h.runtime, Log: &h.log, Clock: s}
	return h
}

// run runs (or resumes) the job on the harness's journal, in the harness's virtual time (a
// second run of one harness carries on from where its clock stopped).
func (h *harness) run(t testing.TB, ctx context.Context) (*runstate.Result, []journal.Event, error) {
	t.Helper()
	var res *runstate.Result
	var runErr error
	h.within(t, ctx, func(ctx context.Context) {
		j, past, err := journal.OpenJournalWith(h.journal, journal.JournalOptions{Clock: h.clock})
		if err != nil {
			t.Error(err)
			return
		}
		cfg := h.cfg
		cfg.Journal, cfg.Past = j, past
		res, runErr = executor.Run(ctx, cfg)
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	})
	events, err := journal.ReadJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	return res, events, runErr
}

// within runs f as the main actor of the harness's Sim, in virtual time from where the last
// call left it (gangs an earlier driver left running go on).
func (h *harness) within(t testing.TB, ctx context.Context, f func(ctx context.Context)) {
	t.Helper()
	if err := h.clock.Run(ctx, f); err != nil {
		t.Fatal(err)
	}
}

// A gang that exits 0 short of its target (a trainer that exits cleanly on SIGTERM) is not done:
// it is relaunched, and the stage's result is the one at the target.
func TestCleanExitShortOfTargetIsNotDone(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		target := g.Workers[0].Env.TargetIter
		if g.Trial == "b0-t0002" && n == 1 {
			return fake.Behavior{Reports: []trial.Report{{Iter: target - 1, Metrics: map[string]float64{"score": 5}}}}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished {
		t.Fatal("not finished")
	}
	var fails, dones int
	for _, e := range events {
		if e.Trial != "b0-t0002" || e.Stage != 0 {
			continue
		}
		switch e.Ev {
		case journal.EvFail:
			fails++
			if !strings.Contains(e.Error, "short of the target") {
				t.Errorf("fail event %q", e.Error)
			}
		case journal.EvDone:
			dones++
			if e.Iter != 1 || *e.Metric == 5 {
				t.Errorf("done at iteration %d with %v: the partial result was recorded", e.Iter, *e.Metric)
			}
		}
	}
	if fails != 1 || dones != 1 || h.runtime.Tries("b0-t0002") < 2 {
		t.Fatalf("%d fails, %d dones, %d launches", fails, dones, h.runtime.Tries("b0-t0002"))
	}
}

// winner and survivors of a finished run, from its journal.
func outcome(t testing.TB, events []journal.Event) (best string, survivors map[[2]int]string) {
	t.Helper()
	survivors = map[[2]int]string{}
	for _, e := range events {
		if e.Ev == journal.EvSync {
			survivors[[2]int{e.Bracket, e.Stage}] = strings.Join(e.Keep, ",")
		}
	}
	return bestOf(events), survivors
}

// bestOf is the top of the last sync of every bracket with the best metric, from the journal.
func bestOf(events []journal.Event) string {
	metric := map[[2]string]float64{}
	lastSync := map[int]journal.Event{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvDone:
			if e.Metric != nil {
				metric[[2]string{e.Trial, fmt.Sprint(e.Stage)}] = *e.Metric
			}
		case journal.EvSync:
			if prev, ok := lastSync[e.Bracket]; !ok || e.Stage >= prev.Stage {
				lastSync[e.Bracket] = e
			}
		}
	}
	best, bestM := "", 0.0
	for _, e := range lastSync {
		if len(e.Keep) == 0 {
			continue
		}
		if m := metric[[2]string{e.Keep[0], fmt.Sprint(e.Stage)}]; best == "" || m > bestM {
			best, bestM = e.Keep[0], m
		}
	}
	return best
}

// doneTwice names a trial-stage journaled done more than once.
func doneTwice(events []journal.Event) string {
	seen := map[[2]string]bool{}
	for _, e := range events {
		if e.Ev != journal.EvDone {
			continue
		}
		k := [2]string{e.Trial, fmt.Sprint(e.Stage)}
		if seen[k] {
			return fmt.Sprintf("%s stage %s", e.Trial, k[1])
		}
		seen[k] = true
	}
	return ""
}

func launches(events []journal.Event, trialID string, stage int) int {
	n := 0
	for _, e := range events {
		if e.Ev == journal.EvLaunch && e.Trial == trialID && e.Stage == stage {
			n++
		}
	}
	return n
}

func count(events []journal.Event, ev journal.Kind, trialID string) int {
	n := 0
	for _, e := range events {
		if e.Ev == ev && (trialID == "" || e.Trial == trialID) {
			n++
		}
	}
	return n
}

// A gang that fails is retried from its checkpoint; one that fails every time is given up after
// MaxRetries retries and the stage goes on without it.
func TestRetryThenGiveUp(t *testing.T) {
	h := newHarness(t, shaSpec)
	boom := errors.New("worker 0: exit status 3")
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		switch {
		case g.Trial == "b0-t0001" && n == 1:
			return fake.Behavior{Err: boom}
		case g.Trial == "b0-t0005":
			return fake.Behavior{Err: boom}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	if n := launches(events, "b0-t0001", 0); n != 2 {
		t.Errorf("b0-t0001 launched %d times in stage 0, want 2", n)
	}
	if n := launches(events, "b0-t0005", 0); n != 3 {
		t.Errorf("b0-t0005 launched %d times in stage 0, want 3 (two retries)", n)
	}
	gaveUp := 0
	for _, e := range events {
		if e.Ev == journal.EvFail && e.GaveUp {
			gaveUp++
			if e.Trial != "b0-t0005" || !strings.Contains(e.Error, "exit status 3") {
				t.Errorf("gave up on %s: %q", e.Trial, e.Error)
			}
		}
	}
	if gaveUp != 1 || res.Brackets[0].Stages[0].Failed != 1 || res.Brackets[0].Stages[0].Retries != 3 {
		t.Fatalf("gave up %d times; stage 0 %+v", gaveUp, res.Brackets[0].Stages[0])
	}
}

// A node lost mid-stage fails its gang; the node is journaled lost, replaced, and the trial
// relaunched from its checkpoint.
func TestLostNodeIsReplaced(t *testing.T) {
	h := newHarness(t, shaSpec)
	var lost string
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		if g.Trial == "b0-t0003" && n == 1 {
			lost = g.Workers[0].Node.ID
			h.provider.Lose(lost)
			return fake.Behavior{Err: errors.New("node gone")}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	var journaled bool
	for _, e := range events {
		if e.Ev == journal.EvNodeOff && e.Error == "lost" && len(e.Nodes) == 1 && e.Nodes[0] == lost {
			journaled = true
		}
	}
	if !journaled || len(h.provider.Created) != 5 || h.runtime.Tries("b0-t0003") != 2 {
		t.Fatalf("lost %s journaled %v; created %v; tries %d", lost, journaled, h.provider.Created, h.runtime.Tries("b0-t0003"))
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
}

// The cluster shrinks at each sync to what the next stage needs, and to nothing at the end.
func TestScaleDownAtSync(t *testing.T) {
	h := newHarness(t, shaSpec)
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	// 8, 4, 2 GPUs on nodes of 2: 4, 2, 1 nodes.
	held, peak := 0, 0
	var atSync []int
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			held++
			peak = max(peak, held)
		case journal.EvNodeOff:
			held -= len(e.Nodes)
		case journal.EvStage:
			atSync = append(atSync, held)
		}
	}
	if peak != 4 || held != 0 || strings.Trim(fmt.Sprint(atSync), "[]") != "0 2 1" || h.provider.Held() != 0 {
		t.Fatalf("peak %d, held at each stage's start %v, at the end %d (provider %d)", peak, atSync, held, h.provider.Held())
	}
}

// hyperbandSpec is shaSpec as a Hyperband job of three brackets, on up to 16 nodes.
var hyperbandSpec = strings.NewReplacer(
	"name: unit\n", "name: unit-hb\n",
	"seed: 3", "seed: 5",
	"algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}", "algorithm: {hyperband: {min_iters: 1, max_iters: 9, eta: 3}}",
	"max_nodes: 4", "max_nodes: 16",
).Replace(shaSpec)

// Hyperband's brackets run at the same time, each on its own nodes, and each picks its best.
func TestHyperbandBracketsInParallel(t *testing.T) {
	h := newHarness(t, hyperbandSpec)
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior { return fake.Behavior{Duration: 20 * time.Millisecond} }
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	brackets := map[int]bool{}
	for _, e := range events {
		if e.Ev == journal.EvSync {
			brackets[e.Bracket] = true
		}
	}
	_, peak := h.runtime.Running()
	if len(brackets) != len(res.Brackets) || len(res.Brackets) != 3 || peak <= 9 || res.Best == nil {
		t.Fatalf("%d brackets synced of %d; %d gangs at most at once; best %+v", len(brackets), len(res.Brackets), peak, res.Best)
	}
}

// Cancelling a run stops its gangs and releases every node, journaled; a resumed run finishes
// with the winner of a clean run.
func TestInterruptReleasesNodesAndResumes(t *testing.T) {
	clean := newHarness(t, shaSpec)
	_, cleanEvents, err := clean.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, shaSpec)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		b := fake.Behavior{}
		if g.Workers[0].Env.TargetIter > 1 {
			once.Do(func() {
				cancel() // the first gang of stage 1: the user presses Ctrl-C
				b.Hang = true
			})
		}
		return b
	}
	_, events, err := h.run(t, ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if now, _ := h.runtime.Running(); now != 0 || h.provider.Held() != 0 {
		t.Fatalf("%d gangs still running, %d nodes held after the interrupt", now, h.provider.Held())
	}
	up, down := 0, 0
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			up++
		case journal.EvNodeOff:
			down += len(e.Nodes)
		}
	}
	if up != down {
		t.Fatalf("journal: %d nodes up, %d released", up, down)
	}
	h.runtime.Behave = nil
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("resume: %v", err)
	}
	wantBest, wantSurv := outcome(t, cleanEvents)
	gotBest, gotSurv := outcome(t, events)
	if gotBest != wantBest || fmt.Sprint(gotSurv) != fmt.Sprint(wantSurv) || doneTwice(events) != "" {
		t.Fatalf("resumed best %s survivors %v (done twice: %q); clean %s %v", gotBest, gotSurv, doneTwice(events), wantBest, wantSurv)
	}
}

// The derived budget compresses the profile's part by the time scale, not the minute given to
// what the profile does not see: a launch whose overhead is wall time (here 30 ms, beyond the
// 1.2 ms the compressed profile takes) is not stopped as timed out.
func TestBudgetKeepsLaunchOverheadInWallTime(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.cfg.TimeScale = 1e-4
	h.runtime.Behave = func(gang.Gang, int) fake.Behavior { return fake.Behavior{Duration: 30 * time.Millisecond} }
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	for _, e := range events {
		if e.Ev == journal.EvTimeout || e.Ev == journal.EvFail {
			t.Fatalf("%s %s: %s", e.Ev, e.Trial, e.Error)
		}
	}
	for _, g := range h.runtime.Launches {
		if g.Timeout < time.Minute || g.Timeout > time.Minute+10*time.Millisecond {
			t.Fatalf("%s launched with a budget of %v, want a minute plus the compressed profile", g.Trial, g.Timeout)
		}
	}
}

// A gang past its budget (trainer.timeout) is stopped and retried from its checkpoint, and the
// journal says so.
func TestTimeoutStopsAndRetries(t *testing.T) {
	h := newHarness(t, strings.Replace(shaSpec, "trainer: {command: [train]}", "trainer: {command: [train], timeout: 300ms}", 1))
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		if g.Trial == "b0-t0004" && n == 1 {
			return fake.Behavior{Hang: true, Reports: []trial.Report{}}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v", err)
	}
	if el := h.clock.Now().Sub(epoch); el > time.Minute {
		t.Fatalf("a hanging gang held the run for %v of virtual time", el)
	}
	if count(events, journal.EvTimeout, "b0-t0004") != 1 || h.runtime.Tries("b0-t0004") != 2 || res.Brackets[0].Stages[0].Timeouts != 1 {
		t.Fatalf("timeouts %d, tries %d, stage %+v", count(events, journal.EvTimeout, "b0-t0004"), h.runtime.Tries("b0-t0004"), res.Brackets[0].Stages[0])
	}
	if !strings.Contains(h.log.String(), "budget") {
		t.Fatalf("the run log does not say why: %s", h.log.String())
	}
}

// A run that fails releases its nodes, unless told to keep them.
func TestFailedRunReleasesNodes(t *testing.T) {
	for _, keep := range []bool{false, true} {
		h := newHarness(t, shaSpec)
		h.cfg.KeepNodes = keep
		h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior { return fake.Behavior{Err: errors.New("exit status 1")} }
		_, events, err := h.run(t, context.Background())
		if err == nil || !strings.Contains(err.Error(), "all failed the same way") {
			t.Fatalf("keep %v: run: %v", keep, err)
		}
		held := h.provider.Held()
		if keep && held != 4 || !keep && held != 0 {
			t.Fatalf("keep %v: %d nodes held after the failure", keep, held)
		}
		if !keep && count(events, journal.EvNodeOff, "") == 0 {
			t.Fatal("the release is not journaled")
		}
	}
}

// A Create that brings up only some nodes fails the run, and the nodes that did come up are
// journaled and released, not leaked.
func TestPartialCreateReleasesWhatCameUp(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.provider.CreateFault = func(call, n int) (int, error) { return n - 1, errors.New("insufficient capacity") }
	_, events, err := h.run(t, context.Background())
	if err == nil || !strings.Contains(err.Error(), "insufficient capacity") {
		t.Fatalf("run: %v", err)
	}
	if h.provider.Held() != 0 || count(events, journal.EvNodeUp, "") != 3 || len(h.provider.Deleted) != 3 {
		t.Fatalf("held %d, journaled up %d, deleted %v", h.provider.Held(), count(events, journal.EvNodeUp, ""), h.provider.Deleted)
	}
}

// A release that fails is an error that says so, not a silent leak.
func TestDeleteErrorIsReported(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.provider.DeleteFault = func(call int, ids []string) error { return errors.New("throttled") }
	_, _, err := h.run(t, context.Background())
	if err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("run: %v", err)
	}
}

// The meter bills every node at the price it was rented at, which the provider says.
func TestNodesBilledAtTheirOwnPrice(t *testing.T) {
	cost := func(price float64) float64 {
		h := newHarness(t, shaSpec)
		h.provider.Offer = cloud.Offer{Market: cloud.OnDemand, PricePerHour: price}
		res, _, err := h.run(t, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res.Realized.Cost
	}
	// Every node is held less than the 60 s minimum charge: the cost is exact.
	at, twice := cost(3.6), cost(7.2)
	if want := 4 * 60 * 3.6 / 3600; math.Abs(at-want) > 1e-9 || math.Abs(twice-2*at) > 1e-9 {
		t.Fatalf("cost at $3.6/h %v (want %v: 4 nodes, a minute each), at $7.2/h %v", at, want, twice)
	}
}

// An instance the journal does not know, listed while still pending (RunningAt zero: a dead
// driver's last RunInstances), is released on resume and bills nothing beyond the minimum
// charge of a span that starts at its release: it never ran.
func TestPendingOrphanIsNotBilled(t *testing.T) {
	h := newHarness(t, shaSpec)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		b := fake.Behavior{}
		if g.Workers[0].Env.TargetIter > 1 {
			once.Do(func() { cancel(); b.Hang = true })
		}
		return b
	}
	if _, _, err := h.run(t, ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	h.runtime.Behave = nil
	interrupted, err := os.ReadFile(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	resume := func(orphan bool) (float64, []journal.Event) {
		if err := os.WriteFile(h.journal, interrupted, 0o644); err != nil {
			t.Fatal(err)
		}
		if orphan {
			h.provider.Adopt(cloud.Node{ID: "pending-1", GPUs: 2, InstanceType: "p3.2xlarge", Market: cloud.OnDemand, PricePerHour: 3.6})
		}
		res, events, err := h.run(t, context.Background())
		if err != nil || !res.Finished {
			t.Fatalf("resume: %v", err)
		}
		return res.Realized.Cost, events
	}
	without, _ := resume(false)
	with, events := resume(true)
	if d := with - without; d < 0 || d > 60*3.6/3600+1e-9 {
		t.Fatalf("a pending orphan added $%v to the cost ($%v without it): want at most one minimum charge", d, without)
	}
	for _, e := range events {
		if e.Ev == journal.EvNodeUp && e.Node.ID == "pending-1" && (e.At.Year() < 2000 || e.Node.RunningAt.Year() < 2000) {
			t.Fatalf("the orphan is journaled running at %v (event at %v)", e.Node.RunningAt, e.At)
		}
	}
	if !slices.Contains(h.provider.Deleted, "pending-1") {
		t.Fatalf("the orphan was not released: deleted %v", h.provider.Deleted)
	}
}

// A driver that dies while the provider rents its nodes (the request journaled, no answer) rents
// nothing twice: its resumed successor leaves the nodes the provider says that request rented
// (their Token) to it, and repeats it under its token: the provider hands them back.
func TestRepeatedRequestRentsNothingTwice(t *testing.T) {
	clean := newHarness(t, shaSpec)
	if _, _, err := clean.run(t, context.Background()); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(clean.journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole, []byte("\n"))
	events, _ := journal.ReadJournal(clean.journal)
	cut := -1
	for i, e := range events {
		if e.Ev == journal.EvRequest {
			cut = i
			break
		}
	}
	if cut < 0 || events[cut].Token == "" || events[cut].Count < 1 {
		t.Fatalf("the clean run journaled no request with a token: %v", events)
	}
	req := events[cut]
	for _, pending := range []bool{false, true} {
		h := newHarness(t, shaSpec)
		if err := os.WriteFile(h.journal, bytes.Join(lines[:cut+1], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		// What the dead driver's request rented, unknown to the journal.
		rented, err := h.provider.Create(context.Background(), cloud.Request{Count: req.Count, Token: req.Token})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range rented {
			ids = append(ids, n.ID)
		}
		if pending {
			h.provider.Pending(ids...)
		}
		res, after, err := h.run(t, context.Background())
		if err != nil || !res.Finished {
			t.Fatalf("pending %v: resume: %v", pending, err)
		}
		if len(h.provider.Created) != len(clean.provider.Created) {
			t.Errorf("pending %v: %d nodes rented in all, a clean run rents %d: the dead driver's %v were rented again", pending, len(h.provider.Created), len(clean.provider.Created), ids)
		}
		journaled := map[string]bool{}
		for _, e := range after {
			if e.Ev == journal.EvNodeUp {
				journaled[e.Node.ID] = true
			}
		}
		for _, id := range ids {
			if !journaled[id] {
				t.Errorf("pending %v: node %s of the dead driver's request is not in the journal", pending, id)
			}
		}
		if h.provider.Held() != 0 {
			t.Errorf("pending %v: %d nodes still held at the end", pending, h.provider.Held())
		}
		if want := "left to bracket 0's request that rented it"; !strings.Contains(h.log.String(), want) {
			t.Errorf("the resumed driver did not say it left the nodes to the request it repeats: %s", h.log.String())
		}
	}
}

// onSpot makes the harness's job rent spot nodes, and its provider rent them.
func onSpot(h *harness) {
	h.cfg.Experiment.Cluster.Market = spec.MarketSpot
	h.provider.Offer = cloud.Offer{InstanceType: h.cfg.Experiment.Cluster.InstanceType, Market: cloud.Spot, PricePerHour: 3.67}
}

// A spot node whose worker was told it is being interrupted: the gang ends with an
// InterruptedError naming it; the driver journals an interruption (not a node lost), releases the
// node though the provider still holds it, rents a replacement, and relaunches the gang
// from its checkpoint. Interrupted tries are not retries: with MaxRetries 1, a trial interrupted
// twice and failing once still finishes, with the winner of a clean run.
func TestSpotInterruptionIsReplacedAndNotARetry(t *testing.T) {
	clean := newHarness(t, shaSpec)
	want, _, err := clean.run(t, context.Background())
	if err != nil || want.Best == nil {
		t.Fatalf("clean run: %v", err)
	}

	h := newHarness(t, shaSpec)
	onSpot(h)
	h.cfg.MaxRetries = 1
	var doomed []string
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		if g.Trial != "b0-t0003" {
			return fake.Behavior{}
		}
		target := g.Workers[0].Env.TargetIter
		switch n {
		case 1, 2: // the provider still holds the node: only the notice says it goes
			doomed = append(doomed, g.Workers[0].Node.ID)
			return fake.Behavior{Reports: []trial.Report{{Iter: target - 1, Metrics: map[string]float64{"score": 0}}},
				Err: &gang.InterruptedError{Node: g.Workers[0].Node.ID, Reason: "spot interruption notice"}}
		case 3:
			return fake.Behavior{Err: errors.New("a trainer bug")}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v\n%s", err, h.log.String())
	}
	if res.Best == nil || res.Best.Trial != want.Best.Trial {
		t.Fatalf("best %+v, a clean run's %+v", res.Best, want.Best)
	}
	var interrupted []string
	var lostTries, failedTries int
	for _, e := range events {
		switch {
		case e.Ev == journal.EvInterrupt:
			interrupted = append(interrupted, e.Nodes...)
			if e.Error != "spot interruption notice" {
				t.Errorf("interruption journaled with %q", e.Error)
			}
		case e.Ev == journal.EvNodeOff && e.Error == "lost":
			t.Errorf("a spot interruption journaled as a node lost: %+v", e)
		case e.Ev == journal.EvFail && e.Trial == "b0-t0003" && e.Interrupted:
			lostTries++
		case e.Ev == journal.EvFail && e.Trial == "b0-t0003":
			failedTries++
		}
	}
	if !slices.Equal(interrupted, doomed) || lostTries != 2 || failedTries != 1 || h.runtime.Tries("b0-t0003") < 4 {
		t.Fatalf("interrupted %v (doomed %v); %d interrupted and %d failed tries; %d launches", interrupted, doomed, lostTries, failedTries, h.runtime.Tries("b0-t0003"))
	}
	for _, id := range doomed {
		if !slices.Contains(h.provider.Deleted, id) {
			t.Errorf("interrupted node %s was never released", id)
		}
	}
	if len(res.Interruptions) != 2 || res.Brackets[0].Stages[0].Interrupted != 2 || res.Brackets[0].Stages[0].Retries != 1 {
		t.Fatalf("report: interruptions %+v, stage 0 %+v", res.Interruptions, res.Brackets[0].Stages[0])
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
}

// Two gangs share a spot node that is being interrupted. The first one's worker reads the notice
// and ends; the other is still training. The driver stops it, so that it saves its checkpoint
// within the notice, and releases the node only once it has exited: terminating the node at once
// would lose what that gang had not saved (CI caught the EC2 run relaunching a trial at an
// iteration it had passed).
func TestInterruptedNodeIsReleasedOnlyOnceItsGangsEnded(t *testing.T) {
	h := newHarness(t, shaSpec)
	onSpot(h)
	var mu sync.Mutex
	firstNode := map[string]string{} // each trial's first launch's node
	doomed := ""
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		mu.Lock()
		defer mu.Unlock()
		if n > 1 {
			return fake.Behavior{}
		}
		firstNode[g.Trial] = g.Workers[0].Node.ID
		if g.Trial == "b0-t0003" {
			doomed = g.Workers[0].Node.ID
			return fake.Behavior{Duration: 50 * time.Millisecond, Err: &gang.InterruptedError{Node: doomed, Reason: "spot interruption notice"}}
		}
		return fake.Behavior{Duration: time.Second} // still training when the notice comes
	}
	var releasedAt time.Time
	h.provider.DeleteFault = func(call int, ids []string) error {
		mu.Lock()
		defer mu.Unlock()
		if doomed != "" && slices.Contains(ids, doomed) && releasedAt.IsZero() {
			releasedAt = h.clock.Now()
		}
		return nil
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v\n%s", err, h.log.String())
	}
	neighbour := ""
	for id, node := range firstNode {
		if node == doomed && id != "b0-t0003" {
			neighbour = id
		}
	}
	if neighbour == "" || releasedAt.IsZero() {
		t.Fatalf("no gang shared node %s with b0-t0003 (%v), or the node was never released", doomed, firstNode)
	}
	var stopped *journal.Event
	for i, e := range events {
		if e.Ev == journal.EvFail && e.Trial == neighbour && e.Stage == 0 {
			stopped = &events[i]
			break
		}
	}
	if stopped == nil || !stopped.Interrupted || !strings.Contains(stopped.Error, "stopped") {
		t.Fatalf("the gang of %s on the interrupted node was not stopped as one that lost its node: %+v\n%s", neighbour, stopped, h.log.String())
	}
	if releasedAt.Before(stopped.Exited) {
		t.Fatalf("node %s released %s before the gang of %s on it exited: its checkpoint was not saved yet", doomed, stopped.Exited.Sub(releasedAt), neighbour)
	}
	if since := stopped.Exited.Sub(stopped.Began); since >= time.Second {
		t.Fatalf("the gang of %s ran %s: it was not stopped when its node was doomed", neighbour, since)
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
}
