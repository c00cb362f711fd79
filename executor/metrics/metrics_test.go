package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
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

// The metrics follow the journal: nodes by type and market as they come and go (lost ones
// counted), gangs running, trial-stages done, retries and give-ups, timeouts, each bracket's
// stage; a resume ends the old driver's gangs; progress and the finish set time and cost.
func TestMetricsFollowTheJournal(t *testing.T) {
	m := New("r1", "exp", 120, 3.5)
	node := func(id, typ string, market cloud.Market) *cloud.Node {
		return &cloud.Node{ID: id, GPUs: 4, InstanceType: typ, Market: market}
	}
	for _, e := range []executor.Event{
		{Ev: executor.EvNodeUp, Node: node("n1", "p3.8xlarge", cloud.OnDemand)},
		{Ev: executor.EvNodeUp, Node: node("n2", "p3.8xlarge", cloud.Spot)},
		{Ev: executor.EvNodeUp, Node: node("n3", "p3.8xlarge", cloud.Spot)},
		{Ev: executor.EvNodeUp, Node: node("n3", "p3.8xlarge", cloud.Spot)}, // journaled twice: counted once
		{Ev: executor.EvStage, Bracket: 0, Stage: 1},
		{Ev: executor.EvLaunch, Trial: "a"}, {Ev: executor.EvLaunch, Trial: "b"}, {Ev: executor.EvLaunch, Trial: "c"},
		{Ev: executor.EvDone, Trial: "a"},
		{Ev: executor.EvFail, Trial: "b"},
		{Ev: executor.EvTimeout, Trial: "c"}, {Ev: executor.EvFail, Trial: "c", GaveUp: true},
		{Ev: executor.EvNodeOff, Nodes: []string{"n3"}, Error: "lost"},
		{Ev: executor.EvLaunch, Trial: "b"}, {Ev: executor.EvLaunch, Trial: "d"},
		{Ev: executor.EvNodeUp, Node: node("n4", "p3.8xlarge", cloud.Spot)},
		{Ev: executor.EvInterrupt, Nodes: []string{"n4"}, Error: "spot interruption notice"},
		{Ev: executor.EvFail, Trial: "d", Interrupted: true}, {Ev: executor.EvLaunch, Trial: "d"},
	} {
		m.Observe(e)
	}
	m.Progress(executor.Status{Elapsed: 42 * time.Second, Cost: 1.25})
	text := scrape(t, m)
	wantLines(t, text,
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
	m.Observe(executor.Event{Ev: executor.EvResume})
	m.Observe(executor.Event{Ev: executor.EvNodeOff, Nodes: []string{"n1", "n2", "unknown"}})
	m.Finished(130, 3.75)
	wantLines(t, scrape(t, m),
		`rubberband_trials_running{experiment="exp",run="r1"} 0`,
		`rubberband_nodes{experiment="exp",instance_type="p3.8xlarge",market="spot",run="r1"} 0`,
		`rubberband_nodes_lost_total{experiment="exp",run="r1"} 2`,
		`rubberband_elapsed_seconds{experiment="exp",run="r1"} 130`,
		`rubberband_cost_dollars{experiment="exp",run="r1"} 3.75`,
	)
}
