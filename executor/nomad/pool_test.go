package nomad

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/trial"
)

// A gang on a team's clients is pinned by node ID, asks for each worker's GPUs as nvidia/gpu
// devices only on clients that have them, and runs in its clients' node pool ("all" across
// pools); a gang on rubberband's own clients is as before.
func TestOnClients(t *testing.T) {
	testGang := func(nodes ...string) gang.Gang {
		g := gang.Gang{Trial: "t1", Command: []string{"/bin/true"}}
		for rank, n := range nodes {
			g.Workers = append(g.Workers, gang.Worker{Node: cloud.Node{ID: n, GPUs: 2},
				Env: trial.Env{TrialID: "t1", TargetIter: 1, Rank: rank, WorldSize: len(nodes), GPUs: []int{rank % 2}}})
		}
		return g
	}
	facts := map[string]nodeFacts{"id-gpu": {pool: "gpu", gpus: true}, "id-cpu": {pool: "gpu"}, "id-other": {pool: "batch", gpus: true}}
	for _, c := range []struct {
		name    string
		pin     bool
		nodes   []string
		pool    string // "" : none set
		devices []bool // per worker
	}{
		{"devices where fingerprinted", true, []string{"id-gpu", "id-cpu"}, "gpu", []bool{true, false}},
		{"clients in two pools", true, []string{"id-gpu", "id-other"}, "all", []bool{true, true}},
		{"rubberband's own clients", false, []string{"id-gpu", "id-cpu"}, "", []bool{false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Runtime{PinNodeID: c.pin, nodes: facts}
			g := testGang(c.nodes...)
			job, err := r.job(g)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.onClients(context.Background(), job, g); err != nil {
				t.Fatal(err)
			}
			if got := ptrOr(job.NodePool); got != c.pool {
				t.Errorf("node pool %q, want %q", got, c.pool)
			}
			for i, tg := range job.TaskGroups {
				want := nomad.NewConstraint("${meta."+NodeMeta+"}", "=", c.nodes[i])
				if c.pin {
					want = nomad.NewConstraint("${node.unique.id}", "=", c.nodes[i])
				}
				if len(tg.Constraints) != 1 || *tg.Constraints[0] != *want {
					t.Errorf("%s: constraints %+v, want %+v", *tg.Name, tg.Constraints, want)
				}
				task := tg.Tasks[0]
				devs := task.Resources.Devices
				if !c.devices[i] {
					if len(devs) != 0 || task.Env[worker.GPUDevicesEnv] != "" {
						t.Errorf("%s: devices %+v, env %q on a client without GPU devices", *tg.Name, devs, task.Env[worker.GPUDevicesEnv])
					}
					continue
				}
				if len(devs) != 1 || devs[0].Name != "nvidia/gpu" || *devs[0].Count != 1 || task.Env[worker.GPUDevicesEnv] != "1" {
					t.Errorf("%s: devices %+v, env %q; want one nvidia/gpu", *tg.Name, devs, task.Env[worker.GPUDevicesEnv])
				}
			}
		})
	}
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A gang pinned by node ID runs on that client, which carries an rb_node meta of another value:
// the constraint names the node's ID, not its meta.
func pinnedByNodeID(t *testing.T, c cluster) {
	nodes, _, err := c.n.Client.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, n := range nodes {
		if n.Name == "node-b" {
			id = n.ID
		}
	}
	r, _ := c.runtime(t)
	r.PinNodeID = true
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	os.WriteFile(specFile, []byte(synthSpec), 0o644)
	g := gang.Gang{Trial: "b0-t0009", Command: []string{"rubberband", "trainer", "synthetic", "--spec", specFile},
		Workers: []gang.Worker{{Node: cloud.Node{ID: id, GPUs: 2, Addr: "127.0.0.1"}, Env: trial.Env{TrialID: "b0-t0009",
			Experiment: "nomad-synth", Params: map[string]any{"x": 0.5}, TargetIter: 2, WorldSize: 1, MasterAddr: "127.0.0.1", GPUs: []int{0}}}}}
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range h.Reports() {
		n++
	}
	if err := h.Wait(); err != nil || n != 2 {
		t.Fatalf("%d reports, %v", n, err)
	}
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "b0-t0009.log"))
	if !strings.Contains(string(log), "rank 0 on node node-b, allocation ") {
		t.Fatalf("the gang did not run on node-b:\n%s", log)
	}
}
