package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubenode"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// examples/deploy/kubernetes applied to a real API server with its Deployment controller and
// scheduler, the server's pod run by the node agent on one of two nodes, a real PostgreSQL for
// its database and mirror, MinIO for checkpoints, its secrets from the manifest's Secrets. The
// server's pod is deleted mid-run and its node cordoned: the Deployment's next pod, scheduled on
// the other node, takes the lease, restores the run's folder from the database and finishes it
// with the clean run's winner, nothing launched twice.
//
// The agent has no container runtime: the pod's command runs this build's binary on the host
// (the manifest's /rubberband), in a folder of the pod's own; the trainers run inside the
// server's pod (--backend local, as the Nomad deployment test does), hostNetwork gives the test
// the server's address.
func TestServerDeploymentOnKubernetes(t *testing.T) {
	t.Parallel()
	k := kubeCP.Get(t)
	k.StartControllers(t)
	winner := cleanWinner(t)
	pg := servers.StartPostgres(t)
	minio := servers.RunMinIO(t)
	ns := k.Namespace(t)
	dir := t.TempDir()
	ctx := context.Background()
	tls, err := k.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(dir, "agent")
	agent, err := kubenode.Start(ctx, kubenode.Config{Client: k.Client, TLS: tls, Dir: agentDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	place := map[string]string{"rubberband.dev/server": ns}
	for _, n := range []string{"a", "b"} {
		if _, err := agent.AddNode(ctx, kubenode.Node{Name: ns + "-" + n, GPUs: 0, Labels: place}); err != nil {
			t.Fatal(err)
		}
	}
	specFile, _ := syntheticSpec(t, dir, "synthetic.yaml")
	openAbove(t, dir)
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--db", pg.URL, "--storage-prefix", "s3://checkpoints/kube-moves"); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--db", pg.URL)
	if code != 0 {
		t.Fatal(errOut)
	}
	token := strings.TrimSpace(out)

	port := servers.FreePort(t)
	var objs []runtime.Object
	for _, f := range []string{"rbac.yaml", "postgres-secret.yaml", "server.yaml"} {
		b, err := os.ReadFile(filepath.Join("../examples/deploy/kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := servers.Decode([]byte(strings.ReplaceAll(string(b), "namespace: rubberband", "namespace: "+ns)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, got...)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Secret: // what a user fills in
			switch o.Name {
			case "rubberband-server":
				o.StringData = map[string]string{"RUBBERBAND_DB": pg.URL}
			case "rubberband-server-store":
				o.StringData = map[string]string{"AWS_ACCESS_KEY_ID": minio.AccessKey, "AWS_SECRET_ACCESS_KEY": minio.Secret}
			}
		case *appsv1.Deployment: // what the agent and the test need (above)
			pod := &o.Spec.Template.Spec
			pod.HostNetwork, pod.NodeSelector = true, place
			c := &pod.Containers[0]
			if c.Command[0] != "/rubberband" || !slices.Contains(c.Command, "--backend") {
				t.Fatalf("the manifest's command changed: %v", c.Command)
			}
			c.Command[0] = binary
			c.Command = replaceArg(c.Command, "--addr", fmt.Sprintf("127.0.0.1:%d", port))
			c.Command = replaceArg(c.Command, "--root", "runs")
			c.Command = replaceArg(c.Command, "--backend", "local")
			c.Command = replaceArg(c.Command, "--lease", "2s")
			c.Command = append(c.Command, "--time-scale", "0.05")
			c.ReadinessProbe = nil
		}
	}
	if err := k.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(fmt.Sprintf("http://127.0.0.1:%d", port), token)
	if err != nil {
		t.Fatal(err)
	}
	serverPod := func(notNode string) corev1.Pod {
		wait, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		var found corev1.Pod
		err := clock.Until(wait, clock.Wall{}, 100*time.Millisecond, func() bool {
			pods, err := k.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
			if err != nil {
				return false
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" && p.Spec.NodeName != notNode && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					if _, err := cl.Runs(ctx); err == nil {
						found = p
						return true
					}
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("no server pod answers (not on %q)", notNode)
		}
		return found
	}
	first := serverPod("")
	src, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	src = fmt.Appendf(src, "checkpoints: {url: s3://checkpoints/kube-moves, endpoint: %s, insecure: true}\n", minio.Endpoint)
	run, _, err := cl.Submit(ctx, server.Submission{Name: "synthetic.yaml", Spec: string(src)})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, cl, run.ID, journal.EvSync)
	// The node takes no new pod, and the server's pod is deleted: the Deployment makes another,
	// which the scheduler puts on the other node.
	node, err := k.Client.CoreV1().Nodes().Get(ctx, first.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Unschedulable = true
	if _, err := k.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := serverPod(first.Spec.NodeName)
	end := waitRun(t, cl, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || second.Spec.NodeName == first.Spec.NodeName {
		t.Fatalf("after the move: %+v on node %s (was %s)", end, second.Spec.NodeName, first.Spec.NodeName)
	}
	var best struct{ Trial string }
	if err := cl.Get(ctx, run.ID, "best", &best); err != nil || best.Trial != winner {
		t.Fatalf("winner %q (%v); the clean run's is %s", best.Trial, err, winner)
	}
	// Each pod's folder holds its own copy of the run: the second restored it from the database.
	var journals []string
	filepath.WalkDir(agentDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "journal.jsonl" && strings.Contains(path, run.ID) {
			journals = append(journals, path)
		}
		return nil
	})
	has := func(path string, ev journal.Kind) bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), `"ev":"`+string(ev)+`"`)
	}
	var resumed string
	for _, j := range journals {
		if has(j, journal.EvResume) && has(j, journal.EvFinish) {
			resumed = j
		}
	}
	if len(journals) != 2 || resumed == "" {
		t.Fatalf("journals of the run in the pods' folders: %v; want two, the second resumed and finished", journals)
	}
	launchedOnce(t, resumed)
}

// replaceArg sets the value after flag in args.
func replaceArg(args []string, flag, value string) []string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		args[i+1] = value
		return args
	}
	return append(args, flag, value)
}

// The deployment's RBAC is what `rubberband kube-rbac` prints for the server's ServiceAccount:
// the two cannot drift apart. kube-rbac needs no profile and no cluster, and its JSON is a List
// of the same objects.
func TestKubeRBACPrintsTheDeploymentsRBAC(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("../examples/deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := rb(t, "kube-rbac", "-n", "rubberband", "--service-account", "rubberband-server")
	if code != 0 || out != string(want) {
		t.Fatalf("kube-rbac: exit %d (%s); examples/deploy/kubernetes/rbac.yaml is not its output:\n%s", code, errOut, out)
	}
	objs, err := servers.Decode([]byte(out))
	if err != nil || len(objs) != 5 { // the ServiceAccount, Role and RoleBinding, ClusterRole and binding
		t.Fatalf("decoded %d objects: %v", len(objs), err)
	}
	js, _, code := rb(t, "kube-rbac", "-n", "rubberband", "--service-account", "rubberband-server", "--nodes", "karpenter", "-o", "json")
	if code != 0 || !strings.Contains(js, `"kind": "List"`) || !strings.Contains(js, `"nodeclaims"`) || strings.Contains(js, `"leases"`) {
		t.Fatalf("kube-rbac -o json --nodes karpenter:\n%s", js)
	}
}
