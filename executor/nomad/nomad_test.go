package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/selfbin"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/trial"
)

// TestMain makes this test binary the rubberband binary the nodes run (Runtime.Self): started
// as `worker ...` it is the worker (package worker), as `trainer NAME ...` a built-in trainer.
// The tests need no CLI built.
func TestMain(m *testing.M) {
	selfbin.Dispatch(os.Getenv("NOMAD_TASK_DIR"))
	os.Exit(m.Run())
}

// binary is this test binary, the worker and trainers of the nodes (TestMain).
func binary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// cluster is one Nomad server with two client nodes of two GPUs, shared by the tests of this
// package (an agent takes seconds to start).
type cluster struct {
	n    *servers.Nomad
	self string
}

func startCluster(t *testing.T) cluster {
	n := servers.StartNomad(t)
	n.AddClient("node-a", 2)
	n.AddClient("node-b", 2)
	return cluster{n: n, self: binary(t)}
}

// runtime is a Runtime on the cluster with its own checkpoint store and log directory.
func (c cluster) runtime(t *testing.T) (*Runtime, string) {
	dir := t.TempDir()
	store := filepath.Join(dir, "checkpoints")
	return &Runtime{Client: c.n.Client, Self: c.self, StoreEnv: []string{"RB_CHECKPOINTS=file://" + store}, LogDir: filepath.Join(dir, "logs"),
		Grace: time.Second, PlaceTimeout: 2 * time.Second}, store
}

func TestNomad(t *testing.T) {
	c := startCluster(t)
	nodes := []cloud.Node{{ID: "node-a", GPUs: 2, Addr: "127.0.0.1"}, {ID: "node-b", GPUs: 2, Addr: "127.0.0.1"}}
	// The Runtime contract, with gangs across both nodes.
	t.Run("Contract", func(t *testing.T) {
		gangtest.Run(t, func(t *testing.T) gangtest.Env {
			r, dir := c.runtime(t)
			store, err := file.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if jobs, _, _ := c.n.Client.Jobs().List(nil); len(jobs) != 0 {
					t.Errorf("jobs left behind (finished ones are purged, refused ones never registered): %v", jobs[0].ID)
				}
			})
			return gangtest.Env{Runtime: r, Store: store, Nodes: nodes, Unplaceable: "node-z", LogDir: r.LogDir, Grace: r.Grace,
				Slack: 15 * time.Second}
		})
	})
	t.Run("GangAcrossNodes", func(t *testing.T) { gangAcrossNodes(t, c) })
	t.Run("UnplaceableSaysWhy", func(t *testing.T) { unplaceableSaysWhy(t, c) })
	t.Run("NoRoomIsBounded", func(t *testing.T) { noRoomIsBounded(t, c) })
	t.Run("SecretsStayOutOfJobs", func(t *testing.T) { secretsStayOutOfJobs(t, c) })
	t.Run("SpotNoticeStopsTheGangSaving", func(t *testing.T) { spotNoticeStopsTheGangSaving(t, c) })
	t.Run("PinnedByNodeID", func(t *testing.T) { pinnedByNodeID(t, c) })
}

// fakeIMDS serves IMDSv2 with a spot interruption notice from the time given on.
func fakeIMDS(t *testing.T, due func() bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			w.Write([]byte("token"))
		case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/spot/instance-action" && due():
			w.Write([]byte(`{"action":"terminate","time":"2026-11-22T12:00:00Z"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A worker on a spot node that gets the interruption notice stops its trainer; the runtime then
// stops the whole gang as by Stop (rank 0, on an on-demand node, saves what it reached) and Wait
// names the node going away. The next launch continues from that checkpoint.
func spotNoticeStopsTheGangSaving(t *testing.T, c cluster) {
	r, store := c.runtime(t)
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	os.WriteFile(specFile, []byte(synthSpec), 0o644)
	// The notice comes once rank 0 has reported, not at a moment of the wall clock: a gang that
	// took longer than that to start on a loaded machine was interrupted before any report.
	var reported atomic.Bool
	imds := fakeIMDS(t, reported.Load)
	testGang := func(start, target int) gang.Gang {
		g := gang.Gang{Trial: "b0-t0007", Command: []string{"rubberband", "trainer", "synthetic", "--spec", specFile},
			Env: map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds}}
		for rank, node := range []cloud.Node{{ID: "node-a", GPUs: 1, Addr: "127.0.0.1"}, {ID: "node-b", GPUs: 1, Addr: "127.0.0.1", Market: cloud.Spot}} {
			g.Workers = append(g.Workers, gang.Worker{Node: node,
				Env: trial.Env{TrialID: "b0-t0007", Experiment: "nomad-synth", Params: map[string]any{"x": 0.5}, StartIter: start,
					TargetIter: target, Rank: rank, WorldSize: 2, LocalRank: 0, MasterAddr: "127.0.0.1", GPUs: []int{0}}})
		}
		return g
	}
	h, err := r.Launch(t.Context(), testGang(0, 2000)) // 0.03 s an iteration: a minute, unless stopped
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for rep := range h.Reports() {
		last = rep.Iter
		reported.Store(true)
	}
	err = h.Wait()
	var ie *gang.InterruptedError
	if !errors.As(err, &ie) || ie.Node != "node-b" || !strings.Contains(ie.Reason, "spot interruption notice") {
		t.Fatalf("wait: %v, want the interruption of node-b", err)
	}
	if last == 0 || last >= 2000 {
		t.Fatalf("rank 0 reported up to iteration %d", last)
	}
	st, _ := file.New(store)
	if list, _ := st.List(t.Context(), "trials/b0-t0007/"); len(list) != 1 {
		t.Fatalf("checkpoints after the interrupted launch: %v", list)
	}
	imds = fakeIMDS(t, func() bool { return false })
	h, err = r.Launch(t.Context(), testGang(last, last+2))
	if err != nil {
		t.Fatal(err)
	}
	var iters []int
	for rep := range h.Reports() {
		iters = append(iters, rep.Iter)
	}
	if err := h.Wait(); err != nil || len(iters) != 2 || iters[0] != last+1 {
		t.Fatalf("relaunch: %v, reported %v: it did not continue from iteration %d", err, iters, last)
	}
}

// An image gang's credentials reach its container through a Nomad Variable that only its job may
// read: the job read back from Nomad names the variable in a template and holds no secret; the
// variable holds them; Reap purges a dead driver's job and deletes its variable.
func secretsStayOutOfJobs(t *testing.T, c cluster) {
	r, _ := c.runtime(t)
	r.RunID = "r20260101-000000-5ec7e75a"
	const secret = "s3cr3t-Key/value+1"
	r.Secrets = []string{"AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY=" + secret}
	g := gang.Gang{Trial: "t-secret", Image: "trainer:1", Command: []string{"/rubberband", "trainer", "mlp"},
		Workers: []gang.Worker{{Node: cloud.Node{ID: "node-a", GPUs: 2, Addr: "127.0.0.1"},
			Env: trial.Env{TrialID: "t-secret", TargetIter: 1, WorldSize: 1, GPUs: []int{0}}}}}
	job, err := r.job(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.writeSecrets(t.Context(), g, *job.ID); err != nil {
		t.Fatal(err)
	}
	// Registered as Launch does (no client here runs docker: it stays pending, as a job left by a
	// driver that died could).
	if _, _, err := c.n.Client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	back, _, err := c.n.Client.Jobs().Info(*job.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(back)
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("AKIAEXAMPLE")) {
		t.Fatalf("the job Nomad holds contains a credential:\n%s", b)
	}
	task := back.TaskGroups[0].Tasks[0]
	if len(task.Templates) != 1 || !strings.Contains(*task.Templates[0].EmbeddedTmpl, secretsPath(*job.ID)) || !*task.Templates[0].Envvars {
		t.Fatalf("no env template of the job's variable: %+v", task.Templates)
	}
	v, _, err := c.n.Client.Variables().Read(secretsPath(*job.ID), nil)
	if err != nil || v.Items["AWS_SECRET_ACCESS_KEY"] != secret {
		t.Fatalf("the job's variable: %+v, %v", v, err)
	}
	if err := r.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, _, _ := c.n.Client.Variables().PrefixList(secretsPath(r.jobPrefix()), nil); len(left) != 0 {
		t.Fatalf("secrets left after Reap: %s", left[0].Path)
	}
	if jobs, _, _ := c.n.Client.Jobs().List(&nomad.QueryOptions{Prefix: *job.ID}); len(jobs) != 0 {
		t.Fatalf("job %s left after Reap", *job.ID)
	}
}

const synthSpec = `name: nomad-synth
objective: {metric: score}
algorithm: {stages: [{trials: 1, iters: 3}]}
search_space: {x: {type: uniform, min: 0, max: 1}}
cluster: {gpus_per_node: 1, price_per_hour: 1}
profile: {iter_latency: {1: {dist: constant, value: 0.05}, 2: {dist: constant, value: 0.03}}}
`

// The built-in trainer as a gang of two workers on two client nodes: reports arrive through the
// API, rank 0's checkpoint reaches the store, the next launch continues from it, the trial's log
// holds each worker's output under its own header, and finished jobs are purged.
func gangAcrossNodes(t *testing.T, c cluster) {
	r, store := c.runtime(t)
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	os.WriteFile(specFile, []byte(synthSpec), 0o644)
	testGang := func(start, target int) gang.Gang {
		g := gang.Gang{Trial: "b0-t0001", Command: []string{"rubberband", "trainer", "synthetic", "--spec", specFile}}
		for rank, node := range []string{"node-a", "node-b"} {
			g.Workers = append(g.Workers, gang.Worker{Node: cloud.Node{ID: node, GPUs: 1, Addr: "127.0.0.1"},
				Env: trial.Env{TrialID: "b0-t0001", Experiment: "nomad-synth", Params: map[string]any{"x": 0.5}, StartIter: start,
					TargetIter: target, Rank: rank, WorldSize: 2, LocalRank: 0, MasterAddr: "127.0.0.1", GPUs: []int{0}}})
		}
		return g
	}
	run := func(start, target int) []int {
		h, err := r.Launch(context.Background(), testGang(start, target))
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
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "b0-t0001.log"))
	for _, want := range []string{"2 worker(s), iterations 0 -> 3", "2 worker(s), iterations 3 -> 5", "rank 0 on node node-a, allocation ",
		"rank 1 on node node-b, allocation ", "(complete): stderr"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if jobs, _, _ := c.n.Client.Jobs().List(nil); len(jobs) != 0 {
		t.Fatalf("finished jobs not purged: %v", jobs)
	}
}

// A gang pinned to a node Nomad does not have is refused with Nomad's reason, at once, and never
// registered.
func unplaceableSaysWhy(t *testing.T, c cluster) {
	r, _ := c.runtime(t)
	r.PlaceTimeout = time.Minute // refused by the plan, not by the timeout
	g := gang.Gang{Trial: "b0-t0003", Command: []string{"/bin/true"}, Workers: []gang.Worker{{
		Node: cloud.Node{ID: "node-z", GPUs: 1}, Env: trial.Env{TrialID: "b0-t0003", TargetIter: 1, WorldSize: 1}}}}
	start := time.Now()
	_, err := r.Launch(context.Background(), g)
	if !errors.Is(err, gang.ErrUnplaceable) || !strings.Contains(err.Error(), "rb_node") || !strings.Contains(err.Error(), "rank-0") {
		t.Fatalf("launch: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("refused after %v", took)
	}
	if jobs, _, _ := c.n.Client.Jobs().List(nil); len(jobs) != 0 {
		t.Fatalf("a refused gang was registered: %v", jobs[0].ID)
	}
}

// A gang whose node has no room for it is planned again until PlaceTimeout, then refused, having
// registered nothing.
func noRoomIsBounded(t *testing.T, c cluster) {
	r, _ := c.runtime(t)
	g := gang.Gang{Trial: "b0-t0004", Command: []string{"/bin/true"}, MemoryMB: 1 << 30, Workers: []gang.Worker{{
		Node: cloud.Node{ID: "node-a", GPUs: 1}, Env: trial.Env{TrialID: "b0-t0004", TargetIter: 1, WorldSize: 1}}}}
	start := time.Now()
	_, err := r.Launch(context.Background(), g)
	took := time.Since(start)
	if !errors.Is(err, gang.ErrUnplaceable) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("launch: %v", err)
	}
	if took < r.PlaceTimeout || took > r.PlaceTimeout+10*time.Second {
		t.Fatalf("refused after %v, want after the place timeout of %v", took, r.PlaceTimeout)
	}
	if jobs, _, _ := c.n.Client.Jobs().List(nil); len(jobs) != 0 {
		t.Fatalf("a refused gang was registered: %v", jobs[0].ID)
	}
}
