package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin"
)

// TestMain makes this test binary the rubberband binary the local runtime starts (its Self):
// `trainer NAME ...` runs a built-in trainer.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "trainer" {
		if err := builtin.Main(context.Background(), os.Args[2:], os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// jobSpec is a small synthetic SHA job; the trainer reads its profile from the spec's own file.
const jobSpec = `name: driver-job
deadline: 10m
seed: 5
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 3, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [rubberband, trainer, synthetic, --spec, SPEC]}
cluster: {gpus_per_node: 2, price_per_hour: 6, billing: {minimum: 0s}, scale_latency: {value: 2s}, init_latency: {value: 1s}, max_nodes: 2}
profile: {iter_latency: {1: {mean: 2, std: 0.1}, 2: {mean: 1.2, std: 0.1}}, startup_latency: {value: 1s}}
planner: {samples: 30}
`

// newRun plans jobSpec and makes a run of it, on the local backend at timeScale.
func newRun(t *testing.T, timeScale float64) *rundir.State {
	t.Helper()
	tmp := t.TempDir()
	path := filepath.Join(tmp, "job.yaml")
	os.WriteFile(path, []byte(strings.ReplaceAll(jobSpec, "SPEC", path)), 0o600)
	exp, src, err := spec.LoadSource(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, _, err := planner.PlanSpec(context.Background(), exp)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "run")
	rf := rundir.RunFile{RunID: journal.NewRunID(time.Now(), 1), Backend: Local, TimeScale: timeScale}
	if err := Create(NewRun{Dir: dir, Run: rf, Source: src, Spec: exp, Plan: rep}); err != nil {
		t.Fatal(err)
	}
	st, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Execute runs a run on the local backend to its end: the report is written, the driver log
// says so with the stages numbered from 1, and what the driver made is private; a cancel then
// finds it finished.
func TestExecute(t *testing.T) {
	st := newRun(t, 0.02)
	lock, err := Lock(st.Dir, st.Run.RunID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, res, err := Execute(context.Background(), st.Dir, Options{Log: &out, NoReplan: true})
	lock.Close()
	if err != nil {
		t.Fatalf("execute: %v\n%s", err, out.String())
	}
	if !res.Finished || res.Best == nil {
		t.Fatalf("not finished: %+v", res)
	}
	if !strings.Contains(out.String(), "[sha] stage 1/2: ") || strings.Contains(out.String(), "stage 0/") {
		t.Errorf("progress:\n%s", out.String())
	}
	log, _ := os.ReadFile(filepath.Join(st.Dir, rundir.DriverLog))
	if !strings.Contains(string(log), " "+st.Run.RunID+" finished: JCT ") || !strings.Contains(string(log), "[sha] stage 2/2: ") {
		t.Errorf("driver log:\n%s", log)
	}
	for name, want := range map[string]os.FileMode{rundir.ReportFile: 0o600, rundir.DriverLog: 0o600, rundir.LogsDir: 0o700, rundir.WorkDir: 0o700, rundir.CheckpointsDir: 0o700} {
		if info, err := os.Stat(filepath.Join(st.Dir, name)); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: %v, %v", name, info.Mode(), err)
		}
	}
	if what, err := Cancel(context.Background(), st, time.Second, nil); err != nil || what != HadFinished {
		t.Errorf("cancel of a finished run: %v, %v", what, err)
	}
}

// A run whose driver is gone is cancelled here: journaled once, and a second cancel finds it
// cancelled; a run another live driver holds is refused by Lock.
func TestCancelStale(t *testing.T) {
	st := newRun(t, 1)
	j, _, err := journal.OpenJournal(filepath.Join(st.Dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	rundir.RequestCancel(st.Dir, time.Now())
	for range 2 {
		if what, err := Cancel(context.Background(), st, time.Second, nil); err != nil || what != WasCancelled {
			t.Fatalf("cancel: %v, %v", what, err)
		}
	}
	events, err := journal.ReadJournal(filepath.Join(st.Dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Ev == journal.EvCancel {
			n++
		}
	}
	if n != 1 || rundir.CancelRequested(st.Dir) {
		t.Fatalf("%d cancel events; the request is still there: %v", n, rundir.CancelRequested(st.Dir))
	}
	lock, err := Lock(st.Dir, "someone-else", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := Lock(st.Dir, st.Run.RunID, nil); !errors.Is(err, ErrInput) {
		t.Fatalf("a held lock: %v", err)
	}
}

// Check refuses, as input to change, what a backend cannot run; an unknown backend too.
func TestCheck(t *testing.T) {
	exp, err := spec.Load("../examples/paper/table2-types.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(Local, exp); err != nil {
		t.Errorf("local: %v", err)
	}
	for _, tc := range []struct{ backend, want string }{
		{Nomad, "rents one kind of node"},
		{EC2, "needs a cluster.ec2 block"},
		{"virtualbox", `"virtualbox" is not a backend (local, nomad, ec2, kube or virtual)`},
	} {
		if err := Check(tc.backend, exp); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.backend, err, tc.want)
		}
	}
}

// ec2Needs is the peak of nodes of each type and market: the stages of a bracket in turn, the
// brackets side by side.
func TestEC2Needs(t *testing.T) {
	alloc := sim.Alloc{
		{{Nodes: 4}, {Nodes: 2}, {Nodes: 1, Type: "p3.2xlarge", Market: "spot"}},
		{{Nodes: 3}, {Nodes: 2, Type: "p3.2xlarge", Market: "spot"}},
	}
	want := []ec2.Need{{Nodes: 7}, {InstanceType: "p3.2xlarge", Market: cloud.Spot, Nodes: 3}}
	if got := ec2Needs(alloc); !reflect.DeepEqual(got, want) {
		t.Fatalf("needs %+v, want %+v", got, want)
	}
}

// A hedged stage needs its on-demand nodes of its type on the on-demand market, and only the
// rest on spot.
func TestEC2NeedsHedged(t *testing.T) {
	alloc := sim.Alloc{{{Nodes: 5, Type: "p3.2xlarge", Market: "spot", OnDemand: 2}, {Nodes: 2, Type: "p3.2xlarge", Market: "spot"}}}
	want := []ec2.Need{{InstanceType: "p3.2xlarge", Market: cloud.OnDemand, Nodes: 2}, {InstanceType: "p3.2xlarge", Market: cloud.Spot, Nodes: 3}}
	if got := ec2Needs(alloc); !reflect.DeepEqual(got, want) {
		t.Fatalf("needs %+v, want %+v", got, want)
	}
}

func TestStampLines(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	got := string(stampLines([]byte("one\ntwo"), at, "r1"))
	if want := "2026-03-04T05:06:07.008Z r1 one\n2026-03-04T05:06:07.008Z r1 two\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// The progress line's ETA follows the latest forecast once a review made one: a run re-planned
// (or found slower than planned) says when it is now expected to end, not when the plan said.
func TestProgressETAFollowsTheForecast(t *testing.T) {
	var out bytes.Buffer
	l := NewLog(&out, false, nil, "r")
	l.Progress(runstate.Status{Bracket: "b", Done: 1, Total: 1, Elapsed: 10 * time.Second}, 40)
	l.Progress(runstate.Status{Bracket: "b", Done: 1, Total: 1, Elapsed: 10 * time.Second, Forecast: 70}, 40)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "ETA "+format.Clock(30)) || !strings.Contains(lines[1], "ETA "+format.Clock(60)) {
		t.Fatalf("progress lines:\n%s", out.String())
	}
}

// An ec2 run's workers get none of the driver's keys with an instance profile, image or not,
// and no warning is said; without one a command trainer's get none either (its instances hold
// their own), an image's containers get the driver's keys, and the warning says so.
func TestEC2Credentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDDRIVER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "driver-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	for _, c := range []struct {
		profile, image string
		served         bool
		secrets        []string
		warning        string
	}{
		{profile: "rb-node", image: "registry/trainer:1"},
		{profile: "arn:aws:iam::123456789012:instance-profile/rb-node"},
		{secrets: nil, warning: "instance_profile is not set: instances read checkpoints with credentials their AMI must hold; "},
		{image: "registry/trainer:1", secrets: []string{"AWS_ACCESS_KEY_ID=AKIDDRIVER", "AWS_SECRET_ACCESS_KEY=driver-secret", "AWS_REGION=us-east-1"},
			warning: "containers with this driver's own AWS keys"},
		// A server's run: the driver's keys are the server's, and no team's container gets them.
		{image: "registry/trainer:1", served: true, secrets: nil, warning: "containers get no credentials"},
	} {
		exp := &spec.Experiment{Trainer: spec.Trainer{Image: c.image}, Cluster: spec.Cluster{EC2: &spec.EC2{InstanceProfile: c.profile}}}
		secrets, warning := ec2Credentials(exp, c.served)
		if !reflect.DeepEqual(secrets, c.secrets) || (c.warning == "") != (warning == "") || !strings.Contains(warning, c.warning) {
			t.Errorf("profile %q, image %q: secrets %q, warning %q; want %q and %q", c.profile, c.image, secrets, warning, c.secrets, c.warning)
		}
	}
}

// A server's run (served) on Nomad with trainer.image: the driver's environment is the
// server's, and its AWS keys never become any team container's Nomad Variables.
func TestStoreSecretsNeverTheServers(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSERVER")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sentinel")
	exp := &spec.Experiment{Trainer: spec.Trainer{Image: "registry/trainer:1"}}
	if got := storeSecrets(exp, true); got != nil {
		t.Fatalf("a server's run hands its containers %q", got)
	}
	if got := storeSecrets(exp, false); len(got) != 2 {
		t.Fatalf("`rubberband run` with an image: secrets %q, want the user's two keys", got)
	}
}
