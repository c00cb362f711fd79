package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("no line %q in\n%s", l, text)
		}
	}
}

const unitSpec = `
name: exp
deadline: 1h
objective: {metric: score, mode: max}
algorithm: {stages: [{trials: 4, iters: 1}, {trials: 2, iters: 1}, {trials: 1, iters: 1}]}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [train]}
cluster: {gpus_per_node: 4, price_per_hour: 3.6, max_nodes: 8}
profile: {iter_latency: {1: {mean: 1}}}
`

// snapshotOf folds events as a run's journal.
func snapshotOf(t *testing.T, events []journal.Event) *runstate.Snapshot {
	t.Helper()
	exp, err := spec.Parse("unit.yaml", []byte(unitSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	read := make([]journal.Event, len(events)) // as the journal reads them back: in today's shape
	for i, e := range events {
		read[i] = journal.Upgrade(e)
	}
	snap, err := runstate.Fold(runstate.Plan{Experiment: exp, Alloc: m.Elastic([][]int{{4, 2, 1}})}, read)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// The metrics read the run's snapshot: nodes by type and market as they come and go (lost ones
// counted), gangs running, trial-stages done, retries and give-ups, timeouts, each bracket's
// stage; a resume ends the old driver's gangs; progress and the finish set time and cost.
func TestMetricsReadTheSnapshot(t *testing.T) {
	m := New("r1", "exp", 120, 3.5)
	node := func(id string, market cloud.Market) *cloud.Node {
		return &cloud.Node{ID: id, GPUs: 4, InstanceType: "p3.8xlarge", Market: market}
	}
	events := []journal.Event{{Ev: journal.EvStart}}
	for _, id := range []string{"a", "b", "c", "d"} {
		events = append(events, journal.Event{Ev: journal.EvTrial, Trial: id})
	}
	events = append(events, []journal.Event{
		{Ev: journal.EvNodeUp, Node: node("n1", cloud.OnDemand)},
		{Ev: journal.EvNodeUp, Node: node("n2", cloud.Spot)},
		{Ev: journal.EvNodeUp, Node: node("n3", cloud.Spot)},
		{Ev: journal.EvNodeUp, Node: node("n3", cloud.Spot)}, // journaled twice: counted once
		{Ev: journal.EvStage, Bracket: 0, Stage: 1},
		{Ev: journal.EvLaunch, Trial: "a"}, {Ev: journal.EvLaunch, Trial: "b"}, {Ev: journal.EvLaunch, Trial: "c"},
		{Ev: journal.EvDone, Trial: "a"},
		{Ev: journal.EvFail, Trial: "b"},
		{Ev: journal.EvTimeout, Trial: "c"}, {Ev: journal.EvFail, Trial: "c", GaveUp: true},
		{Ev: journal.EvNodeOff, Nodes: []string{"n3"}, Error: "lost"}, // a journal of before causes
		{Ev: journal.EvLaunch, Trial: "b"}, {Ev: journal.EvLaunch, Trial: "d"},
		{Ev: journal.EvNodeUp, Node: node("n4", cloud.Spot)},
		{Ev: journal.EvInterrupt, Nodes: []string{"n4"}, Error: "spot interruption notice"},
		{Ev: journal.EvFail, Trial: "d", Interrupted: true}, {Ev: journal.EvLaunch, Trial: "d"},
	}...)
	if got := scrape(t, m); strings.Contains(got, "rubberband_nodes{") {
		t.Fatalf("metrics of a run not followed yet:\n%s", got)
	}
	snap := snapshotOf(t, events)
	m.Follow(func() *runstate.Snapshot { return snap })
	m.Progress(runstate.Status{Elapsed: 42 * time.Second, Cost: 1.25})
	wantLines(t, scrape(t, m),
		`rubberband_nodes{experiment="exp",instance_type="p3.8xlarge",market="on-demand",run="r1"} 1`,
		`rubberband_nodes{experiment="exp",instance_type="p3.8xlarge",market="spot",run="r1"} 1`,
		`rubberband_nodes_lost_total{experiment="exp",run="r1"} 2`,
		`rubberband_spot_interruptions_total{experiment="exp",run="r1"} 1`,
		`rubberband_interrupted_tries_total{experiment="exp",run="r1"} 1`,
		`rubberband_stage{bracket="0",experiment="exp",run="r1"} 2`,
		`rubberband_trials_running{experiment="exp",run="r1"} 2`,
		`rubberband_trial_stages_done_total{experiment="exp",run="r1"} 1`,
		`rubberband_retries_total{experiment="exp",run="r1"} 1`,
		`rubberband_trials_failed_total{experiment="exp",run="r1"} 1`,
		`rubberband_timeouts_total{experiment="exp",run="r1"} 1`,
		`rubberband_elapsed_seconds{experiment="exp",run="r1"} 42`,
		`rubberband_cost_dollars{experiment="exp",run="r1"} 1.25`,
		`rubberband_predicted_jct_seconds{experiment="exp",run="r1"} 120`,
		`rubberband_predicted_cost_dollars{experiment="exp",run="r1"} 3.5`,
	)
	snap = snapshotOf(t, append(events, journal.Event{Ev: journal.EvResume},
		journal.Event{Ev: journal.EvNodeOff, Nodes: []string{"n1", "n2", "unknown"}}))
	m.Finished(130, 3.75)
	wantLines(t, scrape(t, m),
		`rubberband_trials_running{experiment="exp",run="r1"} 0`,
		`rubberband_nodes{experiment="exp",instance_type="p3.8xlarge",market="spot",run="r1"} 0`,
		`rubberband_nodes_lost_total{experiment="exp",run="r1"} 2`,
		`rubberband_elapsed_seconds{experiment="exp",run="r1"} 130`,
		`rubberband_cost_dollars{experiment="exp",run="r1"} 3.75`,
	)
}
