package kubenode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/rubberband-hpo/rubberband/internal/syncio"
)

// Config is what an Agent needs.
type Config struct {
	Client kubernetes.Interface // the agent's credentials (tests: kube.Client, admin)
	TLS    *tls.Config          // its kubelet API's serving config (tests: kube.ServingTLS())
	Dir    string               // where pods' working folders and logs live
	Log    io.Writer            // the agent's own messages (nil: discard)

	maxLog int64 // a pod's log file cap; 0: defaultMaxLog (tests make it small)
}

// defaultMaxLog bounds a pod's log file: a runaway trainer must not fill the test machine's disk.
const defaultMaxLog = 64 << 20

// Node is a machine the agent registers.
type Node struct {
	Name, InstanceType, CapacityType string // CapacityType: "on-demand" or "spot"
	GPUs                             int
	Labels                           map[string]string
	Taints                           []corev1.Taint
	ProviderID                       string
}

// Agent is the kubelet of every Node it registered: it runs their pods as local processes.
type Agent struct {
	cfg    Config
	client kubernetes.Interface
	port   int
	srv    *http.Server
	cancel context.CancelFunc
	close  sync.Once
	pods   cache.SharedIndexInformer

	mu     sync.Mutex
	closed bool
	nodes  map[string]bool       // the nodes this agent runs (and that still exist)
	runs   map[types.UID]*podRun // pods whose life cycle the agent is running
	done   map[types.UID]bool    // pods handled to the end, or not the agent's to run: whether deleted
	logs   map[string]*logFile   // "namespace/name" → the latest pod of that name's log
	procs  int                   // pod processes started and not yet reaped
	wg     sync.WaitGroup        // the goroutines of runs and immediate deletions
}

// Start serves the kubelet API on 127.0.0.1 (a free port) and watches pods and nodes until ctx
// ends or Close.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.Client == nil || cfg.TLS == nil || cfg.Dir == "" {
		return nil, errors.New("kubenode: Config needs Client, TLS and Dir")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	// Pods' goroutines write it at once.
	cfg.Log = &syncio.Writer{W: cfg.Log}
	if cfg.maxLog == 0 {
		cfg.maxLog = defaultMaxLog
	}
	a := &Agent{cfg: cfg, client: cfg.Client, nodes: map[string]bool{}, runs: map[types.UID]*podRun{},
		done: map[types.UID]bool{}, logs: map[string]*logFile{}}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kubenode: listen: %w", err)
	}
	a.port = ln.Addr().(*net.TCPAddr).Port
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.serveLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go a.srv.Serve(tls.NewListener(ln, cfg.TLS.Clone()))

	ctx, a.cancel = context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	a.pods = factory.Core().V1().Pods().Informer()
	nodes := factory.Core().V1().Nodes().Informer()
	if _, err := a.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.syncPod(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { a.syncPod(obj.(*corev1.Pod)) },
		DeleteFunc: a.podGone,
	}); err != nil {
		a.Close()
		return nil, fmt.Errorf("kubenode: pod handler: %w", err)
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: a.nodeGone}); err != nil {
		a.Close()
		return nil, fmt.Errorf("kubenode: node handler: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			a.Close()
			return nil, fmt.Errorf("kubenode: %v cache not synced: %w", typ, context.Cause(ctx))
		}
	}
	a.logf("serving the kubelet API on 127.0.0.1:%d", a.port)
	return a, nil
}

// Close kills every pod process (SIGKILL), waits for them and stops serving. Node objects and
// pods stay as last reported.
func (a *Agent) Close() { a.close.Do(a.shutdown) }

func (a *Agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	for _, r := range a.runs {
		r.kill()
	}
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
	}
}

// Port is the kubelet API's port on 127.0.0.1.
func (a *Agent) Port() int { return a.port }

// Processes is the number of pod processes running now (tests check nothing is left).
func (a *Agent) Processes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.procs
}

// AddNode creates the Node, Ready, and runs the pods bound to it.
func (a *Agent) AddNode(ctx context.Context, n Node) (*corev1.Node, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errors.New("kubenode: agent closed")
	}
	a.nodes[n.Name] = true
	a.mu.Unlock()
	created, err := a.client.CoreV1().Nodes().Create(ctx, a.node(n), metav1.CreateOptions{})
	if err != nil {
		a.forgetNode(n.Name)
		return nil, fmt.Errorf("kubenode: create node %s: %w", n.Name, err)
	}
	// The API server's TaintNodesByCondition admission taints every new Node not-ready; the node
	// lifecycle controller, which does not run here, lifts it once the node is Ready.
	if created, err = a.updateNode(ctx, n.Name, "lift the not-ready taint of", false, notReadyTaint(true)); err != nil {
		return nil, err
	}
	a.logf("node %s registered (%d GPUs, %s)", n.Name, n.GPUs, n.CapacityType)
	// Pods bound before the node was registered came by before the agent cared.
	for _, obj := range a.pods.GetStore().List() {
		if p := obj.(*corev1.Pod); p.Spec.NodeName == n.Name {
			a.syncPod(p)
		}
	}
	return created, nil
}

func (a *Agent) node(n Node) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname":           n.Name,
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": n.InstanceType,
		"karpenter.sh/capacity-type":       n.CapacityType,
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	res := corev1.ResourceList{
		"nvidia.com/gpu":      *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: n.ProviderID, Taints: n.Taints},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(),
			Phase: corev1.NodeRunning,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(a.port)}},
			Conditions:      []corev1.NodeCondition{readyCondition(true, now)},
			NodeInfo:        corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2-rubberband-kubenode"},
		},
	}
}

func readyCondition(ready bool, now metav1.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubenode agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	if !ready {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "kubenode agent: node marked not ready"
	}
	return c
}

// RemoveNode is the machine vanishing: its pods' processes are SIGKILLed (their pods keep the
// status last reported) and the Node object is deleted.
func (a *Agent) RemoveNode(ctx context.Context, name string) error {
	a.forgetNode(name)
	if err := a.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubenode: delete node %s: %w", name, err)
	}
	a.logf("node %s removed", name)
	return nil
}

// forgetNode stops running the node and kills its pods' processes, returning once they are reaped.
func (a *Agent) forgetNode(name string) {
	a.mu.Lock()
	delete(a.nodes, name)
	var gone []*podRun
	for _, r := range a.runs {
		if r.node == name {
			r.kill()
			gone = append(gone, r)
		}
	}
	a.mu.Unlock()
	for _, r := range gone {
		<-r.finished
	}
}

func (a *Agent) nodeGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	a.mu.Lock()
	ours := a.nodes[n.Name]
	a.mu.Unlock()
	if ours {
		a.logf("node %s deleted from the API: killing its pods", n.Name)
		// Not on the informer's goroutine: reaping waits for processes.
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.forgetNode(n.Name) }()
	}
}

// SetReady sets the Node's Ready condition (status subresource) and, as the node lifecycle
// controller would, the node.kubernetes.io/not-ready:NoSchedule taint.
func (a *Agent) SetReady(ctx context.Context, name string, ready bool) error {
	what := fmt.Sprintf("set ready=%v", ready)
	if _, err := a.updateNode(ctx, name, what, false, notReadyTaint(ready)); err != nil {
		return err
	}
	_, err := a.updateNode(ctx, name, what, true, func(n *corev1.Node) {
		c := readyCondition(ready, metav1.Now())
		for i := range n.Status.Conditions {
			if old := &n.Status.Conditions[i]; old.Type == corev1.NodeReady {
				if old.Status == c.Status {
					c.LastTransitionTime = old.LastTransitionTime
				}
				*old = c
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, c)
	})
	return err
}

// notReadyTaint lifts the not-ready taint from a ready node, or puts it on one that is not.
func notReadyTaint(ready bool) func(*corev1.Node) {
	return func(n *corev1.Node) {
		taints := n.Spec.Taints[:0:0]
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady || t.Effect != corev1.TaintEffectNoSchedule {
				taints = append(taints, t)
			}
		}
		if !ready {
			taints = append(taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = taints
	}
}

// Taint adds a taint to the Node (a reclaim notice); one of the same key and effect is replaced.
func (a *Agent) Taint(ctx context.Context, name string, t corev1.Taint) error {
	_, err := a.updateNode(ctx, name, "taint", false, func(n *corev1.Node) {
		taints := []corev1.Taint{t}
		for _, old := range n.Spec.Taints {
			if old.Key != t.Key || old.Effect != t.Effect {
				taints = append(taints, old)
			}
		}
		n.Spec.Taints = taints
	})
	return err
}

// updateNode changes the Node (its status subresource when status), again on a conflict.
func (a *Agent) updateNode(ctx context.Context, name, what string, status bool, change func(*corev1.Node)) (*corev1.Node, error) {
	nodes := a.client.CoreV1().Nodes()
	var updated *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		if status {
			updated, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		} else {
			updated, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kubenode: %s node %s: %w", what, name, err)
	}
	return updated, nil
}

// syncPod acts on a pod's new state; it runs on the informer's goroutine, so it only starts
// goroutines and signals them.
func (a *Agent) syncPod(p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || !a.nodes[p.Spec.NodeName] {
		return
	}
	if r, ok := a.runs[p.UID]; ok {
		if p.DeletionTimestamp != nil {
			r.terminate(p.DeletionGracePeriodSeconds)
		}
		return
	}
	deleted, seen := a.done[p.UID]
	switch {
	case seen && (deleted || p.DeletionTimestamp == nil):
	case p.DeletionTimestamp != nil:
		// Never started here, or its process ended already: nothing to stop.
		a.done[p.UID] = true
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.deletePod(p) }()
	case seen || p.Status.Phase != corev1.PodPending:
		// Run to its end, or started by an agent before this one whose process went with it.
		a.done[p.UID] = false
	default:
		r := newPodRun(a, p)
		a.runs[p.UID] = r
		a.wg.Add(1)
		go r.run()
	}
}

// podGone is a pod deleted from the API: whatever still runs of it is killed.
func (a *Agent) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.runs[p.UID]; ok {
		r.kill()
	}
}

// deletePod deletes the pod for good, as a kubelet does once its containers are gone.
func (a *Agent) deletePod(p *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	err := a.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		a.logf("pod %s/%s: delete: %v", p.Namespace, p.Name, err)
		return
	}
	a.logf("pod %s/%s deleted", p.Namespace, p.Name)
}

func (a *Agent) logf(format string, args ...any) {
	fmt.Fprintf(a.cfg.Log, "kubenode: "+format+"\n", args...)
}
