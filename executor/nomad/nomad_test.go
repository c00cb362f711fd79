package nomad

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/internal/servers"
	"github.com/rubberband-hpo/rubberband/trial"
)

// binary builds the rubberband CLI, which the nodes run as the worker wrapper.
func binary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "rubberband")
	if b, err := exec.Command("go", "build", "-o", out, "../../cmd/rubberband").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return out
}

const synthSpec = `name: nomad-synth
objective: {metric: score}
algorithm: {stages: [{trials: 1, iters: 3}]}
search_space: {x: {type: uniform, min: 0, max: 1}}
cluster: {gpus_per_node: 1, price_per_hour: 1}
profile: {iter_latency: {1: {dist: constant, value: 0.05}, 2: {dist: constant, value: 0.03}}}
`

// A gang of two workers on two client nodes: reports arrive through the API, rank 0's
// checkpoint reaches the store, and the next launch continues from it.
func TestGangAcrossNodes(t *testing.T) {
	n := servers.StartNomad(t)
	n.AddClient("node-a", 1)
	n.AddClient("node-b", 1)
	self := binary(t)
	dir := t.TempDir()
	specFile := filepath.Join(dir, "spec.yaml")
	os.WriteFile(specFile, []byte(synthSpec), 0o644)
	store := filepath.Join(dir, "checkpoints")
	r := &Runtime{Client: n.Client, Self: self, StoreEnv: []string{"RB_CHECKPOINTS=file://" + store}, Grace: time.Second}
	gang := func(start, target int) executor.Gang {
		g := executor.Gang{Trial: "b0-t0001", Command: []string{"rubberband", "trainer", "synthetic", "--spec", specFile}}
		for rank, node := range []string{"node-a", "node-b"} {
			g.Workers = append(g.Workers, executor.Worker{Node: cloud.Node{ID: node, GPUs: 1, Addr: "127.0.0.1"},
				Env: trial.Env{TrialID: "b0-t0001", Experiment: "nomad-synth", Params: map[string]any{"x": 0.5}, StartIter: start,
					TargetIter: target, Rank: rank, WorldSize: 2, LocalRank: 0, MasterAddr: "127.0.0.1", GPUs: []int{0}}})
		}
		return g
	}
	run := func(start, target int) []int {
		h, err := r.Launch(context.Background(), gang(start, target))
		if err != nil {
			t.Fatal(err)
		}
		var iters []int
		for rep := range h.Reports() {
			iters = append(iters, rep.Iter)
		}
		if err := h.Wait(); err != nil {
			t.Fatalf("gang %d->%d: %v", start, target, err)
		}
		return iters
	}
	if got := run(0, 3); len(got) != 3 || got[2] != 3 {
		t.Fatalf("first launch reported %v", got)
	}
	st, _ := file.New(store)
	if list, _ := st.List(context.Background(), "trials/b0-t0001/"); len(list) != 1 {
		t.Fatalf("checkpoints after the first launch: %v", list)
	}
	if got := run(3, 5); len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("second launch reported %v: it did not continue from the checkpoint", got)
	}
	if jobs, _, _ := n.Client.Jobs().List(nil); len(jobs) != 0 {
		t.Fatalf("finished jobs not purged: %v", jobs)
	}
}

// A worker that fails stops the gang; the failure comes back from Wait.
func TestGangFailure(t *testing.T) {
	n := servers.StartNomad(t)
	n.AddClient("node-a", 2)
	r := &Runtime{Client: n.Client, Self: binary(t), StoreEnv: []string{"RB_CHECKPOINTS=file://" + t.TempDir()}, Grace: time.Second}
	g := executor.Gang{Trial: "b0-t0002", Command: []string{"/bin/sh", "-c", `[ "$RANK" = 1 ] && exit 3; sleep 60`}}
	for rank := range 2 {
		g.Workers = append(g.Workers, executor.Worker{Node: cloud.Node{ID: "node-a", GPUs: 2, Addr: "127.0.0.1"},
			Env: trial.Env{TrialID: "b0-t0002", TargetIter: 1, Rank: rank, WorldSize: 2, GPUs: []int{rank}}})
	}
	start := time.Now()
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	err = h.Wait()
	if err == nil || errors.Is(err, executor.ErrStopped) || time.Since(start) > 30*time.Second {
		t.Fatalf("wait: %v after %v", err, time.Since(start))
	}
}

// A gang Nomad cannot place (pinned to a node that does not exist) fails with Nomad's reason
// instead of waiting forever.
func TestUnplaceableGangFails(t *testing.T) {
	n := servers.StartNomad(t)
	n.AddClient("node-a", 1)
	r := &Runtime{Client: n.Client, Self: binary(t), StoreEnv: []string{"RB_CHECKPOINTS=file://" + t.TempDir()}, PlaceTimeout: 3 * time.Second}
	g := executor.Gang{Trial: "b0-t0003", Command: []string{"/bin/true"}, Workers: []executor.Worker{{
		Node: cloud.Node{ID: "node-z", GPUs: 1}, Env: trial.Env{TrialID: "b0-t0003", TargetIter: 1, WorldSize: 1}}}}
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	err = h.Wait()
	if err == nil || !strings.Contains(err.Error(), "did not place") || !strings.Contains(err.Error(), "rb_node") {
		t.Fatalf("wait: %v", err)
	}
}
