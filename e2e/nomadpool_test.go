package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadpool"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// teamSpec is the synthetic job with a cluster.nomad block selecting the clients of node pool
// gpu whose meta team is ml.
func teamSpec(t *testing.T, dir string) string {
	t.Helper()
	file, _ := syntheticSpec(t, dir, "team.yaml")
	src, _ := os.ReadFile(file)
	text := strings.Replace(string(src), "  max_nodes: 4\n", "  max_nodes: 4\n  nomad: {node_pool: gpu, meta: {team: ml}}\n", 1)
	if text == string(src) {
		t.Fatal("testdata/synthetic.yaml changed: no max_nodes line to put cluster.nomad after")
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A run on a team's cluster: NOMAD_ADDR names a server whose clients were started beforehand, two
// of them matching cluster.nomad and two not. The cluster is locked down (mutual TLS, ACLs), and
// the run has what the nomad CLI would: the TLS files in NOMAD_CACERT, NOMAD_CLIENT_CERT and
// NOMAD_CLIENT_KEY, and in NOMAD_TOKEN a token of examples/nomad/rubberband-acl.hcl alone. The
// run finishes on the matching ones only, leaves every agent running and no claim behind;
// `profile` works on the same clients.
func TestRunOnTeamNomadCluster(t *testing.T) {
	t.Parallel()
	n := servers.StartNomad(t)
	ml := map[string]string{"team": "ml", "gpus": "4"}
	names := map[string]string{} // node ID -> agent name
	var matching []string
	for _, c := range []servers.TeamClient{
		{Name: "team-1", NodePool: "gpu", Meta: ml},
		{Name: "team-2", NodePool: "gpu", Meta: ml},
		{Name: "other-pool", NodePool: "default", Meta: ml},
		{Name: "other-team", NodePool: "gpu", Meta: map[string]string{"team": "web", "gpus": "4"}},
	} {
		id := n.AddTeamClient(c)
		names[id] = c.Name
		if strings.HasPrefix(c.Name, "team-") {
			matching = append(matching, id)
		}
	}
	start := time.Now()
	dir := t.TempDir()
	specFile := teamSpec(t, dir)
	plan := planFile(t, dir, specFile, "8,8,4,2") // two nodes of 4 GPUs in stages 0 and 1
	state := filepath.Join(dir, "state")
	policy, err := os.ReadFile("../examples/nomad/rubberband-acl.hcl")
	if err != nil {
		t.Fatal(err)
	}
	env := n.Env(n.Token("rubberband", string(policy)))
	// A tenth of real time: a launch's budget (its spec time, scaled) must hold a Nomad job's start-up
	// on two busy cores.
	out, errOut, code := rbEnv(t, binary, env, "run", specFile, "--plan", plan, "--backend", "nomad", "--state", state, "--time-scale", "0.1", "-o", "json")
	if !finishedCode(code) {
		t.Fatalf("run on the team's cluster: exit %d\n%s", code, errOut)
	}
	t.Logf("cluster up and run done after %v", time.Since(start))
	var rep runstate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Finished || rep.Best == nil {
		t.Fatalf("report %+v (%v)\n%s", rep, err, errOut)
	}
	ups, launches := 0, 0
	for _, e := range readJournal(t, state) {
		switch e.Ev {
		case journal.EvNodeUp:
			ups++
			if !slices.Contains(matching, e.Node.ID) || e.Node.PricePerHour != 12 {
				t.Errorf("node up %+v: not a matching client (%v) at the spec's price", e.Node, names[e.Node.ID])
			}
		case journal.EvLaunch:
			launches++
			for _, id := range e.Nodes {
				if !slices.Contains(matching, id) {
					t.Errorf("trial %s launched on %s (%s), which does not match cluster.nomad", e.Trial, id, names[id])
				}
			}
		}
	}
	if ups < 2 || launches < 16 {
		t.Fatalf("%d nodes up, %d launches: the run did not use the team's clients", ups, launches)
	}
	teamIntact(t, n, names)

	// profile goes through the same backend.
	profile := filepath.Join(dir, "profile.yaml")
	if _, errOut, code := rbEnv(t, binary, env, "profile", specFile, "--backend", "nomad", "--gpus", "4", "--iters", "2", "--rounds", "1",
		"--time-scale", "0.05", "--out", profile); code != 0 {
		t.Fatalf("profile on the team's cluster: exit %d\n%s", code, errOut)
	}
	if b, err := os.ReadFile(profile); err != nil || !strings.Contains(string(b), "iter_latency") {
		t.Fatalf("profile %s: %v", b, err)
	}
	teamIntact(t, n, names)
	t.Logf("profiled after %v", time.Since(start))
}

// teamIntact fails the test unless every agent of the team runs and is ready, and no claim
// variable is left.
func teamIntact(t *testing.T, n *servers.Nomad, names map[string]string) {
	t.Helper()
	nodes, _, err := n.Client.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, node := range nodes {
		status[node.ID] = node.Status
	}
	for id, name := range names {
		if !n.Running(name) || status[id] != "ready" {
			t.Errorf("agent %s: running %v, status %q: the run must leave the team's agents alone", name, n.Running(name), status[id])
		}
	}
	if claims, _, err := n.Client.Variables().PrefixList(nomadpool.ClaimPrefix, nil); err != nil || len(claims) != 0 {
		t.Errorf("claims left: %d (%v)", len(claims), err)
	}
}

// cluster.nomad names an existing cluster: without NOMAD_ADDR, run and profile on Nomad are
// usage errors that name the variable, and no run is made.
func TestTeamNomadClusterNeedsNomadAddr(t *testing.T) {
	dir := t.TempDir()
	specFile := teamSpec(t, dir)
	state := filepath.Join(dir, "state")
	env := []string{"NOMAD_ADDR=", "RB_NOMAD_BIN=/nonexistent/nomad"} // nothing may be started instead
	for _, args := range [][]string{
		{"run", specFile, "--backend", "nomad", "--state", state},
		{"profile", specFile, "--backend", "nomad", "--out", filepath.Join(dir, "p.yaml")},
	} {
		_, errOut, code := rbEnv(t, binary, env, args...)
		if code != 2 || !strings.Contains(errOut, "NOMAD_ADDR") {
			t.Errorf("%s without NOMAD_ADDR: exit %d, %q; want 2 and a message naming NOMAD_ADDR", args[0], code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(state, rundir.RunJSON)); err == nil {
		t.Error("a run was made without NOMAD_ADDR")
	}
}
