package karpentertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
)

// Options say how NodeClaims are fulfilled.
type Options struct {
	// Latency is how long a machine takes from its NodeClaim to a registered node (the spec's
	// start-up latency), in wall time.
	Latency time.Duration
	// Register makes the node named (default: a Ready Node object, RegisterNode); Remove takes it
	// away (default: the Node object is deleted, RemoveNode). The e2e tests pass the node agent's.
	Register func(ctx context.Context, name, instanceType, capacityType string, gpus int) error
	Remove   func(ctx context.Context, name string) error
	// Fail, when set, says why a NodeClaim's launch fails ("" launches it): the NodeClaim then
	// reports Launched False with that message, as on insufficient capacity.
	Fail func(nodeClaim string) string
}

// Fulfiller fulfils NodeClaims until the context given to Fulfil ends.
type Fulfiller struct {
	dyn    dynamic.Interface
	client kubernetes.Interface
	opts   Options

	mu      sync.Mutex
	pending map[string]context.CancelFunc // NodeClaim -> its launch, until done
	errs    []error
}

// Fulfil starts fulfilling every NodeClaim, new or already there without a node, until ctx ends.
func Fulfil(ctx context.Context, dyn dynamic.Interface, client kubernetes.Interface, opts Options) (*Fulfiller, error) {
	if opts.Register == nil {
		opts.Register = RegisterNode(client)
	}
	if opts.Remove == nil {
		opts.Remove = RemoveNode(client)
	}
	f := &Fulfiller{dyn: dyn, client: client, opts: opts, pending: map[string]context.CancelFunc{}}
	rv, err := f.list(ctx)
	if err != nil {
		return nil, err
	}
	go f.watch(ctx, rv)
	return f, nil
}

// list launches every NodeClaim not launched yet, and returns the version listed.
func (f *Fulfiller) list(ctx context.Context) (string, error) {
	list, err := f.dyn.Resource(karpenter.NodeClaims()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list NodeClaims: %w", err)
	}
	for i := range list.Items {
		f.added(ctx, &list.Items[i])
	}
	return list.GetResourceVersion(), nil
}

// relist is list for the watch: an error is kept, and the watch starts from now.
func (f *Fulfiller) relist(ctx context.Context) string {
	rv, err := f.list(ctx)
	if err != nil && ctx.Err() == nil {
		f.fail(err)
	}
	return rv
}

// watch follows NodeClaims from version rv until ctx ends, watching again from the last version
// seen when a watch closes (a plain watch rather than an informer: client-go's cache would pull
// in a module the project does not require).
func (f *Fulfiller) watch(ctx context.Context, rv string) {
	claims := f.dyn.Resource(karpenter.NodeClaims())
	for ctx.Err() == nil {
		w, err := claims.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				f.fail(fmt.Errorf("watch NodeClaims: %w", err))
			}
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error { // the version expired: list again and go on from there
				rv = f.relist(ctx)
				break
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			switch ev.Type {
			case watch.Added:
				f.added(ctx, u)
			case watch.Deleted:
				f.gone(ctx, u.GetName())
			}
		}
		w.Stop()
	}
}

// added starts the launch of a NodeClaim not launched yet.
func (f *Fulfiller) added(ctx context.Context, u *unstructured.Unstructured) {
	if karpenter.NodeName(u) == "" && karpenter.ConditionOf(u, karpenter.CondLaunched).Status == "" && u.GetDeletionTimestamp() == nil {
		f.launch(ctx, u)
	}
}

// Err is every error the fulfiller met (a registration or removal that failed).
func (f *Fulfiller) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

func (f *Fulfiller) fail(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// launch starts a NodeClaim's machine: after the latency, its node registers and the NodeClaim
// reports it, unless the NodeClaim is deleted first.
func (f *Fulfiller) launch(ctx context.Context, u *unstructured.Unstructured) {
	name := u.GetName()
	lctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	if _, ok := f.pending[name]; ok { // listed again after a watch expired
		f.mu.Unlock()
		cancel()
		return
	}
	f.pending[name] = cancel
	f.mu.Unlock()
	instanceType, capacityType := karpenter.Requirement(u, karpenter.LabelInstanceType), karpenter.Requirement(u, karpenter.LabelCapacityType)
	gpusAsked, _, _ := unstructured.NestedString(u.Object, "spec", "resources", "requests", karpenter.ResourceGPU)
	gpus, _ := strconv.Atoi(gpusAsked)
	go func() {
		defer f.done(name)
		select {
		case <-lctx.Done():
			return
		case <-time.After(f.opts.Latency):
		}
		if f.opts.Fail != nil {
			if why := f.opts.Fail(name); why != "" {
				f.setStatus(lctx, name, nil, condition(karpenter.CondLaunched, "False", "LaunchFailed", why))
				return
			}
		}
		if err := f.opts.Register(lctx, name, instanceType, capacityType, gpus); err != nil {
			if lctx.Err() == nil {
				f.fail(fmt.Errorf("register node %s: %w", name, err))
			}
			return
		}
		q := map[string]any{karpenter.ResourceGPU: strconv.Itoa(gpus)}
		status := map[string]any{"nodeName": name, "providerID": "karpentertest://" + name, "capacity": q, "allocatable": q}
		err := f.setStatus(lctx, name, status,
			condition(karpenter.CondLaunched, "True", "Launched", ""), condition(karpenter.CondRegistered, "True", "Registered", ""),
			condition(karpenter.CondInitialized, "True", "Initialized", ""), condition(karpenter.CondReady, "True", "Ready", ""))
		if err != nil {
			// Deleted while its node registered: the machine goes away with it.
			f.remove(context.WithoutCancel(ctx), name)
		}
	}()
}

func (f *Fulfiller) done(name string) {
	f.mu.Lock()
	if cancel, ok := f.pending[name]; ok {
		cancel()
		delete(f.pending, name)
	}
	f.mu.Unlock()
}

// gone is a NodeClaim deleted: its launch stops and its machine goes away.
func (f *Fulfiller) gone(ctx context.Context, name string) {
	f.done(name)
	f.remove(ctx, name)
}

func (f *Fulfiller) remove(ctx context.Context, name string) {
	if err := f.opts.Remove(ctx, name); err != nil && ctx.Err() == nil {
		f.fail(fmt.Errorf("remove node %s: %w", name, err))
	}
}

// condition is a NodeClaim status condition, now (with sub-second precision: billing starts at
// the Launched one).
func condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339Nano)}
}

// setStatus writes a NodeClaim's status subresource: status's fields and the conditions.
func (f *Fulfiller) setStatus(ctx context.Context, name string, status map[string]any, conds ...map[string]any) error {
	claims := f.dyn.Resource(karpenter.NodeClaims())
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := map[string]any{}
		for k, v := range status {
			st[k] = v
		}
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		st["conditions"] = list
		u.Object["status"] = st
		_, err = claims.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// Reclaim interrupts a spot node as Karpenter's disruption does: it taints the node
// karpenter.sh/disruption=disrupted:NoSchedule, then deletes its NodeClaim, and so the node.
func (f *Fulfiller) Reclaim(ctx context.Context, nodeClaim string) error {
	u, err := f.dyn.Resource(karpenter.NodeClaims()).Get(ctx, nodeClaim, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reclaim %s: %w", nodeClaim, err)
	}
	if node := karpenter.NodeName(u); node != "" {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := f.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoSchedule})
			_, err = f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reclaim %s: taint node %s: %w", nodeClaim, node, err)
		}
	}
	if err := f.dyn.Resource(karpenter.NodeClaims()).Delete(ctx, nodeClaim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reclaim %s: %w", nodeClaim, err)
	}
	return nil
}

// RegisterNode registers a node as a kubelet would: a Node object, Ready, with an InternalIP of
// 127.0.0.1, the instance type and capacity type labels and the GPUs allocatable.
func RegisterNode(client kubernetes.Interface) func(ctx context.Context, name, instanceType, capacityType string, gpus int) error {
	return func(ctx context.Context, name, instanceType, capacityType string, gpus int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			kubepool.LabelInstanceType: instanceType, karpenter.LabelCapacityType: capacityType, "kubernetes.io/hostname": name}}}
		n, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		q := corev1.ResourceList{kubepool.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
		now := metav1.Now()
		n.Status = corev1.NodeStatus{Capacity: q, Allocatable: q,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}
		if n, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		// The API server taints a new node not-ready; the node lifecycle controller, which the
		// test control plane lacks, lifts it once the node is Ready.
		n.Spec.Taints = nil
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
}

// RemoveNode deletes a Node object (one already gone is fine).
func RemoveNode(client kubernetes.Interface) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		err := client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
}
