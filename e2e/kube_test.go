package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter"
	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter/karpentertest"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubenode"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// kubeCP is the package's one Kubernetes control plane, started by the first test that needs
// it and stopped by TestMain; each test has a namespace and nodes of its own.
var kubeCP servers.KubeOnce

// kubeFixture is what a test of --backend kube has: the control plane, its namespace, a node
// agent running the pods as processes of this machine, and a kubeconfig for the driver bound to
// exactly the Role `rubberband kube-rbac` prints.
type kubeFixture struct {
	k          *servers.Kube
	ns         string
	agent      *kubenode.Agent
	kubeconfig string
	dir        string
	// minio is the run's checkpoint store: the workers' pods inherit nothing, so its keys reach
	// them only through the run's Secret.
	minio *servers.MinIO
}

func newKubeFixture(t *testing.T, minio *servers.MinIO, nodes string, drop ...int) *kubeFixture {
	t.Helper()
	if minio == nil {
		minio = servers.RunMinIO(t)
	}
	f := &kubeFixture{k: kubeCP.Get(t), dir: t.TempDir(), minio: minio}
	f.ns = f.k.Namespace(t)
	ctx := context.Background()
	tls, err := f.k.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	if f.agent, err = kubenode.Start(ctx, kubenode.Config{Client: f.k.Client, TLS: tls, Dir: filepath.Join(f.dir, "agent")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.agent.Close)
	access := admit.Access{Namespace: f.ns, ServiceAccount: "rubberband", Nodes: nodes}
	if err := f.k.Apply(ctx, admit.Objects(access, drop...)); err != nil {
		t.Fatal(err)
	}
	token, err := f.k.Token(ctx, f.ns, "rubberband")
	if err != nil {
		t.Fatal(err)
	}
	if f.kubeconfig, err = f.k.Kubeconfig(f.dir, f.k.As(token), f.ns); err != nil {
		t.Fatal(err)
	}
	return f
}

// node registers a node of the agent, named after the test's namespace (nodes are cluster-wide).
func (f *kubeFixture) node(t *testing.T, name string, labels map[string]string, capacity string) string {
	t.Helper()
	name = f.ns + "-" + name
	if _, err := f.agent.AddNode(context.Background(), kubenode.Node{Name: name, GPUs: 4, CapacityType: capacity, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	return name
}

// spec writes the synthetic job with a cluster.kubernetes block (and more cluster lines).
func (f *kubeFixture) spec(t *testing.T, block string, cluster ...string) string {
	t.Helper()
	file, _ := syntheticSpec(t, f.dir, "kube.yaml")
	src, _ := os.ReadFile(file)
	extra := strings.Join(append([]string{"  kubernetes: " + block}, cluster...), "\n")
	text := strings.Replace(string(src), "  max_nodes: 4\n", "  max_nodes: 4\n"+extra+"\n", 1)
	if text == string(src) {
		t.Fatal("testdata/synthetic.yaml changed: no max_nodes line to put cluster.kubernetes after")
	}
	text += fmt.Sprintf("checkpoints: {url: s3://checkpoints/%s, endpoint: %s, insecure: true}\n", f.ns, f.minio.Endpoint)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// env is the driver's: the kubeconfig and the store's keys.
func (f *kubeFixture) env() []string {
	return []string{"KUBECONFIG=" + f.kubeconfig, "AWS_ACCESS_KEY_ID=" + f.minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + f.minio.Secret}
}

// clean fails the test if the run left a pod, a Lease, a Secret of its own or a process.
func (f *kubeFixture) clean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pods, err := f.k.Client.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods left in %s: %d (%v)", f.ns, len(pods.Items), err)
	}
	leases, err := f.k.Client.CoordinationV1().Leases(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("leases left in %s: %d (%v)", f.ns, len(leases.Items), err)
	}
	secrets, err := f.k.Client.CoreV1().Secrets(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "rubberband.dev/run"})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("run secrets left in %s: %d (%v)", f.ns, len(secrets.Items), err)
	}
	if n := f.agent.Processes(); n != 0 {
		t.Errorf("%d trainer processes left on the nodes", n)
	}
}

// startKubeRun starts the CLI with args in the background, its standard error kept (read it
// once it has exited). exited is closed once it has ended: the one Wait is startKubeRun's (two
// would race).
func startKubeRun(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd, &errOut, done
}

// waitJournal polls the run's journal until ok says so, or fails the test after a minute and a
// half (or when the run has ended first).
func waitJournal(t *testing.T, state string, done <-chan struct{}, what string, ok func([]journal.Event) bool) []journal.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var evs []journal.Event
	ended := false
	err := clock.Until(ctx, clock.Wall{}, 50*time.Millisecond, func() bool {
		select {
		case <-done:
			ended = true
		default:
		}
		evs = journalSoFar(state)
		return ok(evs) || ended
	})
	var tail strings.Builder
	for _, e := range evs[max(len(evs)-40, 0):] {
		node := ""
		if e.Node != nil {
			node = e.Node.ID
		}
		fmt.Fprintf(&tail, "  %s %s stage %d trial %s nodes %v node %s %s\n", e.At.Format("15:04:05.000"), e.Ev, e.Stage, e.Trial, e.Nodes, node, e.Error)
	}
	switch {
	case err != nil:
		t.Fatalf("no %s after 90 s; the journal's last records:\n%s", what, tail.String())
	case !ok(evs):
		t.Fatalf("the run ended before %s; the journal's last records:\n%s", what, tail.String())
	}
	return evs
}

// journalSoFar reads the complete lines of a journal being written.
func journalSoFar(state string) []journal.Event {
	b, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
	var evs []journal.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e journal.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// A run on a team's node pool through the CLI, with the driver's RBAC exactly kube-rbac's: the
// pool's spot nodes are claimed by Leases; one of them is reclaimed (Karpenter's disruption
// taint) in mid-stage, and the driver is SIGKILLed after the relaunch (kubeScenario). A node of
// another pool is never used.
func TestRunOnKubePool(t *testing.T) {
	t.Parallel()
	f := newKubeFixture(t, nil, "pool")
	pool := map[string]string{"rubberband.dev/pool": f.ns}
	var members []string
	for i := range 3 {
		members = append(members, f.node(t, fmt.Sprintf("pool-%d", i), pool, "spot"))
	}
	f.node(t, "other", map[string]string{"rubberband.dev/pool": "other"}, "spot")
	specFile := f.spec(t, "{namespace: "+f.ns+", node_selector: {rubberband.dev/pool: "+f.ns+"}}",
		"  market: spot", "  spot_price_per_hour: 4")
	all := kubeScenario(t, f, specFile, func(victim string) {
		if err := f.agent.Taint(context.Background(), victim, corev1.Taint{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoSchedule}); err != nil {
			t.Fatal(err)
		}
	})
	for _, e := range all {
		if e.Ev == journal.EvNodeUp && !slices.Contains(members, e.Node.ID) {
			t.Errorf("node up %s: not a node of the pool %v", e.Node.ID, members)
		}
	}
	// profile goes through the same backend, on the pool's nodes left.
	profile := filepath.Join(f.dir, "profile.yaml")
	if _, errOut, code := rbEnv(t, binary, f.env(), "profile", specFile, "--backend", "kube", "--gpus", "4", "--iters", "2", "--rounds", "1",
		"--time-scale", "0.05", "--out", profile); code != 0 {
		t.Fatalf("profile on the pool: exit %d\n%s", code, errOut)
	}
	if b, err := os.ReadFile(profile); err != nil || !strings.Contains(string(b), "iter_latency") {
		t.Fatalf("profile %s: %v", b, err)
	}
	f.clean(t)
}

// kubeScenario runs specFile's job on --backend kube through the CLI, under a plan of two nodes
// of 4 GPUs in stages 0 and 1: once stage 1 has launched, reclaim takes the node of its first
// launch away; once that node's interruption is journaled and a gang relaunched, the driver is
// SIGKILLed, and `resume` finishes the run. The run must end with the winner of the same plan on
// the local backend, nothing done twice, only the reclaimed node interrupted and nothing launched
// on it afterwards, every node a spot node at the spec's spot price, and nothing left (pods,
// Leases, the run's Secret, processes). It returns the journal.
func kubeScenario(t *testing.T, f *kubeFixture, specFile string, reclaim func(victim string)) []journal.Event {
	t.Helper()
	plan := planFile(t, f.dir, specFile, "8,8,4,2")
	local := filepath.Join(f.dir, "local")
	if _, errOut, code := rbEnv(t, binary, f.env(), "run", specFile, "--plan", plan, "--state", local, "--time-scale", "0.05"); !finishedCode(code) {
		t.Fatalf("the same plan on the local backend: exit %d\n%s", code, errOut)
	}
	state := filepath.Join(f.dir, "state")
	cmd, errOut, exited := startKubeRun(t, f.env(), "run", specFile, "--plan", plan, "--backend", "kube", "--state", state, "--time-scale", "0.1")
	t.Cleanup(func() {
		if t.Failed() {
			cmd.Process.Kill()
			<-exited // its standard error is written no more
			t.Logf("the first driver's standard error:\n%s", errOut.String())
		}
	})

	launched1 := func(e journal.Event) bool { return e.Ev == journal.EvLaunch && e.Stage == 1 }
	evs := waitJournal(t, state, exited, "a launch in stage 1", func(evs []journal.Event) bool { return slices.ContainsFunc(evs, launched1) })
	victim := evs[slices.IndexFunc(evs, launched1)].Nodes[0]
	reclaim(victim)
	interrupted := func(e journal.Event) bool { return e.Ev == journal.EvInterrupt && slices.Contains(e.Nodes, victim) }
	waitJournal(t, state, exited, "the reclaimed node's interruption and a relaunch", func(evs []journal.Event) bool {
		i := slices.IndexFunc(evs, interrupted)
		return i >= 0 && slices.ContainsFunc(evs[i:], func(e journal.Event) bool { return e.Ev == journal.EvLaunch })
	})
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	before := journalSoFar(state)
	finished := map[string]bool{}
	for _, e := range before {
		if e.Ev == journal.EvDone {
			finished[fmt.Sprint(e.Stage, e.Trial)] = true
		}
	}
	if _, resumeErr, code := rbEnv(t, binary, f.env(), "resume", state, "-o", "json"); !finishedCode(code) {
		t.Fatalf("resume on kube: exit %d\n%s\n(the killed driver said: %s)", code, resumeErr, errOut)
	}
	all := readJournal(t, state)
	defer func() {
		if t.Failed() {
			for _, e := range all {
				switch e.Ev {
				case journal.EvInterrupt, journal.EvNodeUp, journal.EvNodeOff, journal.EvResume, journal.EvFail, journal.EvStop:
					t.Logf("%s %s stage %d nodes %v node %v error %q", e.At.Format("15:04:05.000"), e.Ev, e.Stage, e.Nodes, e.Node, e.Error)
				}
			}
		}
	}()
	for _, e := range all[len(before):] {
		if e.Ev == journal.EvLaunch && finished[fmt.Sprint(e.Stage, e.Trial)] {
			t.Errorf("resume relaunched %s in stage %d, which had finished", e.Trial, e.Stage)
		}
	}
	reclaimedAt := firstAt(all, interrupted)
	for _, e := range all {
		switch {
		case e.Ev == journal.EvNodeUp && (e.Node.Market != "spot" || e.Node.PricePerHour != 4):
			t.Errorf("node up %+v: a spot node at the spec's spot price", e.Node)
		case e.Ev == journal.EvInterrupt && !slices.Equal(e.Nodes, []string{victim}):
			t.Errorf("interrupted %v: only %s was reclaimed", e.Nodes, victim)
		case e.Ev == journal.EvLaunch && slices.Contains(e.Nodes, victim) && e.At.After(reclaimedAt):
			t.Errorf("trial %s launched on the reclaimed node %s after its reclaim", e.Trial, victim)
		}
	}
	got, want := readRunReport(t, state), readRunReport(t, local)
	if !got.Finished || got.Best == nil || want.Best == nil || got.Best.Trial != want.Best.Trial || got.Best.Metric != want.Best.Metric {
		t.Fatalf("kube's best %+v, the local backend's %+v", got.Best, want.Best)
	}
	f.clean(t)
	return all
}

// firstAt is when the first event ok matches was written (the zero time when none).
func firstAt(evs []journal.Event, ok func(journal.Event) bool) time.Time {
	if i := slices.IndexFunc(evs, ok); i >= 0 {
		return evs[i].At
	}
	return time.Time{}
}

// The driver needs every rule `rubberband kube-rbac` prints: bound to all of them but one, a
// run on the pool stops, says which request was forbidden, and leaves no pod running.
func TestKubeRBACEachRuleNeeded(t *testing.T) {
	t.Parallel()
	minio := servers.RunMinIO(t)
	rules := admit.Rules("pool")
	for i, r := range rules {
		t.Run(fmt.Sprintf("%d-%s", i, strings.ReplaceAll(r.Resources[0], "/", "-")), func(t *testing.T) {
			t.Parallel()
			f := newKubeFixture(t, minio, "pool", i)
			pool := map[string]string{"rubberband.dev/pool": f.ns}
			f.node(t, "a", pool, "on-demand")
			f.node(t, "b", pool, "on-demand")
			specFile := f.spec(t, "{namespace: "+f.ns+", node_selector: {rubberband.dev/pool: "+f.ns+"}}")
			plan := planFile(t, f.dir, specFile, "8,4,4,2")
			out, errOut, code := rbEnv(t, binary, f.env(), "run", specFile, "--plan", plan, "--backend", "kube",
				"--state", filepath.Join(f.dir, "state"), "--time-scale", "0.05", "-o", "json")
			if finishedCode(code) || !strings.Contains(errOut+out, "forbidden") {
				t.Fatalf("without %v %s (%s): exit %d; want a stop that says forbidden\n%s\n%s", r.Verbs, r.Resources[0], r.Why, code, errOut, out)
			}
			if n := f.agent.Processes(); n != 0 {
				t.Errorf("%d trainer processes left", n)
			}
		})
	}
}

// A run on nodes Karpenter brings up, through the CLI: each node is a NodeClaim for the spec's
// instance type and capacity type, fulfilled by the harness's controller with an agent node
// after the spec's start-up latency. One spot node is reclaimed in mid-stage as Karpenter does
// (its disruption taint, then its NodeClaim and machine gone), and the driver is SIGKILLed after
// the relaunch (kubeScenario); no NodeClaim is left.
func TestRunOnKarpenterNodes(t *testing.T) {
	t.Parallel()
	f := newKubeFixture(t, nil, "karpenter")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.k.InstallCRD(ctx, servers.NodeClaimCRD(t)); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(f.k.Admin)
	if err != nil {
		t.Fatal(err)
	}
	fulfil, err := karpentertest.Fulfil(ctx, dyn, f.k.Client, karpentertest.Options{Latency: 500 * time.Millisecond,
		Register: func(ctx context.Context, name, instanceType, capacityType string, gpus int) error {
			_, err := f.agent.AddNode(ctx, kubenode.Node{Name: name, InstanceType: instanceType, CapacityType: capacityType, GPUs: gpus})
			return err
		},
		Remove: f.agent.RemoveNode})
	if err != nil {
		t.Fatal(err)
	}
	specFile := f.spec(t, "{namespace: "+f.ns+", nodes: karpenter, node_class: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}",
		"  instance_type: g5.12xlarge", "  market: spot", "  spot_price_per_hour: 4")
	all := kubeScenario(t, f, specFile, func(victim string) {
		claims, err := dyn.Resource(karpenter.NodeClaims()).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range claims.Items {
			if karpenter.NodeName(&claims.Items[i]) == victim {
				if err := fulfil.Reclaim(ctx, claims.Items[i].GetName()); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no NodeClaim for node %s", victim)
	})
	for _, e := range all {
		if e.Ev == journal.EvNodeUp && e.Node.InstanceType != "g5.12xlarge" {
			t.Errorf("node up %+v: the spec's instance type", e.Node)
		}
	}
	if left, err := dyn.Resource(karpenter.NodeClaims()).List(ctx, metav1.ListOptions{LabelSelector: kubepool.LabelRun}); err != nil || len(left.Items) != 0 {
		t.Errorf("NodeClaims left: %d (%v)", len(left.Items), err)
	}
	if err := fulfil.Err(); err != nil {
		t.Errorf("the harness's controller: %v", err)
	}
	f.clean(t)
}
