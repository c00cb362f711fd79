package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/internal/logcap"
	"github.com/rubberband-hpo/rubberband/trial"
)

// maxWorkerLog bounds what is kept of one worker's output in memory until the gang ends (the
// trial's log is bounded again by logcap).
const maxWorkerLog = 8 << 20

type handle struct {
	r      *Runtime
	id     string
	trial  string
	header string
	names  []string // each rank's pod
	nodes  []string // each rank's node

	reports chan trial.Report
	exited  chan struct{}
	done    chan struct{}
	stop    chan struct{}
	once    sync.Once
	result  error

	aborted bool  // marked failed in the store
	refused error // a request RBAC refused (an infra.Error): the gang is stopped, the run pauses

	mu       sync.Mutex
	lastIter int
	logs     []*capped // each rank's output, followed from its pod's start
	follow   sync.WaitGroup
	followed []bool
}

func newHandle(r *Runtime, g gang.Gang, id string, pods []*corev1.Pod) *handle {
	h := &handle{r: r, id: id, trial: g.Trial, reports: make(chan trial.Report, 64), exited: make(chan struct{}),
		done: make(chan struct{}), stop: make(chan struct{}), lastIter: -1}
	for i, p := range pods {
		h.names = append(h.names, p.Name)
		h.nodes = append(h.nodes, g.Workers[i].Node.ID)
		h.logs = append(h.logs, &capped{max: maxWorkerLog})
		h.followed = append(h.followed, false)
	}
	h.header = fmt.Sprintf("=== %s: %d worker(s), iterations %d -> %d, pods %s-*\n", time.Now().UTC().Format(time.RFC3339),
		len(g.Workers), g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter, id)
	return h
}

func (h *handle) Reports() <-chan trial.Report { return h.reports }
func (h *handle) Exited() <-chan struct{}      { return h.exited }
func (h *handle) Wait() error                  { <-h.done; return h.result }

// Stop deletes the gang's pods with their grace period: each worker's wrapper passes SIGTERM on
// and saves the checkpoint.
func (h *handle) Stop() { h.once.Do(func() { close(h.stop) }) }

// running waits until every pod runs (following each one's log from then on), bounded by the
// runtime's PlaceTimeout; a pod that ends or fails first fails the launch. A pod deleted makes the
// gang unplaceable at once, and one whose node is deleted or going (a spot node reclaimed between
// the check of the nodes and the pods' start) interrupted, naming the node (*gang.InterruptedError,
// as its Wait would): no kubelet would ever run it, or the node is lost to it.
func (h *handle) running(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.r.placeTimeout())
	defer cancel()
	for {
		pods, err := h.list(ctx)
		if err != nil {
			return err
		}
		up := 0
		for rank, p := range pods {
			switch {
			case p == nil:
				return fmt.Errorf("%w: rank %d's pod %s was deleted before it ran", gang.ErrUnplaceable, rank, h.names[rank])
			case p.Status.Phase == corev1.PodPending:
				if why := h.nodeGoing(ctx, h.nodes[rank]); why != "" {
					return fmt.Errorf("rank %d's pod %s: %w", rank, h.names[rank], &gang.InterruptedError{Node: h.nodes[rank], Reason: why + ", before the pod ran"})
				}
			case p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded:
				h.startFollow(rank)
				up++
			case p.Status.Phase == corev1.PodFailed:
				h.startFollow(rank)
				up++ // its failure is the gang's, seen by watch
			}
		}
		if up == len(h.names) {
			return nil
		}
		if h.r.clock().Sleep(ctx, h.r.poll()) != nil {
			return fmt.Errorf("%w: %d of %d pods running after %v", gang.ErrUnplaceable, up, len(h.names), h.r.placeTimeout())
		}
	}
}

// list reads the gang's pods, by rank (nil: gone).
func (h *handle) list(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := h.r.Client.CoreV1().Pods(h.r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelGang + "=" + h.id})
	if err != nil {
		return nil, fmt.Errorf("read the gang's pods: %w", err)
	}
	out := make([]*corev1.Pod, len(h.names))
	for i := range list.Items {
		p := &list.Items[i]
		for rank, name := range h.names {
			if p.Name == name {
				out[rank] = p
			}
		}
	}
	return out, nil
}

// startFollow follows a rank's log through the API server (pods/log, which the kubelet
// serves) from the start, once: rank 0's reports are passed on as they are printed.
func (h *handle) startFollow(rank int) {
	h.mu.Lock()
	if h.followed[rank] {
		h.mu.Unlock()
		return
	}
	h.followed[rank] = true
	h.mu.Unlock()
	h.follow.Add(1)
	go func() {
		defer h.follow.Done()
		// Not the launch's context: the stream ends with the pod's process.
		stream, err := h.r.Client.CoreV1().Pods(h.r.Namespace).GetLogs(h.names[rank], &corev1.PodLogOptions{Follow: true}).Stream(context.Background())
		if forbidden(err) {
			h.mu.Lock()
			h.refused = h.r.forbidden(fmt.Errorf("read the log of pod %s: %w", h.names[rank], err))
			h.mu.Unlock()
		}
		if err != nil {
			fmt.Fprintf(h.logs[rank], "rubberband: cannot read this worker's output: %v\n", err)
			if rank == 0 {
				h.r.logf("trial %s: cannot follow rank 0's log (its reports are lost): %v", h.trial, err)
			}
			return
		}
		defer stream.Close()
		if rank != 0 {
			io.Copy(h.logs[rank], stream)
			return
		}
		trial.ScanReports(stream, h.logs[rank], func(rep trial.Report) {
			h.mu.Lock()
			fresh := rep.Iter > h.lastIter
			if fresh {
				h.lastIter = rep.Iter
			}
			h.mu.Unlock()
			if fresh {
				h.reports <- rep
			}
		}, func(err error) { fmt.Fprintf(h.logs[rank], "rubberband: ignored a malformed report: %v\n", err) })
	}()
}

// watch follows the pods and their nodes until every pod has ended: the first failure stops the
// rest, a node going stops the gang as Stop does (its checkpoint saved); then the output goes
// into the trial's log, the pods are deleted and the result set.
func (h *handle) watch() {
	defer close(h.done)
	ctx := context.Background()
	stopped, ending := false, false
	failed, failure := -1, "" // the rank that failed first, and how
	lost, lostWhy := -1, ""   // the rank whose node is going, and why
	infraRank, exitInfra := -1, ""
	nodes := map[string]string{} // why each node is going ("" when it is not), read each poll
	for {
		select {
		case <-h.stop:
			if !stopped {
				stopped = true
				if !ending {
					ending = true
					h.deleteAll(-1)
				}
			}
		default:
		}
		pods, err := h.list(ctx)
		if err != nil {
			h.r.clock().Sleep(ctx, h.r.poll())
			continue
		}
		for _, n := range h.nodes {
			nodes[n] = h.nodeGoing(ctx, n)
		}
		ended := 0
		for rank, p := range pods {
			if p == nil || (p.DeletionTimestamp != nil && !ending) {
				// Deleted by someone else (a resumed driver's Reap, an administrator): not
				// this gang's end as asked for.
				if failed < 0 && lost < 0 && !stopped && !ending {
					failed, failure = rank, fmt.Sprintf("rank %d's pod %s was deleted by someone else", rank, h.names[rank])
				}
				if p == nil {
					ended++
					continue
				}
			}
			if p.Status.Phase == corev1.PodRunning {
				h.startFollow(rank)
			}
			term := terminated(p)
			if term == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				if why := nodes[h.nodes[rank]]; why != "" && lost < 0 && failed < 0 {
					lost, lostWhy = rank, why
				}
				continue
			}
			ended++
			code := -1
			if term != nil {
				code = int(term.ExitCode)
			}
			if code != 0 && failed < 0 && lost < 0 && !stopped {
				failed = rank
				failure = fmt.Sprintf("rank %d (pod %s on node %s) exited %d%s", rank, p.Name, h.nodes[rank], code, reason(p, term))
				switch code {
				case worker.ExitInterrupted:
					lost, lostWhy, failed = rank, "its worker was told the node is going", -1
				case worker.ExitInfra:
					infraRank, exitInfra = rank, failure
				}
			}
		}
		h.mu.Lock()
		refused := h.refused
		h.mu.Unlock()
		if refused != nil && !ending {
			ending = true
			h.deleteAll(-1)
		}
		if !ending && (failed >= 0 || lost >= 0 || infraRank >= 0) {
			ending = true
			if lost >= 0 {
				h.r.logf("trial %s: node %s %s: stopping the gang, its checkpoint saved", h.trial, h.nodes[lost], lostWhy)
				h.deleteAll(-1) // as Stop: rank 0 saves what it reached
				h.forgetDeletedNodes(nodes)
			} else {
				// A gang is whole or not at all: the rest is stopped, saving nothing (the mark
				// tells rank 0's wrapper).
				h.markAborted(ctx)
				h.deleteAll(-1)
			}
		}
		if ended == len(h.names) {
			break
		}
		if ending {
			h.forgetDeletedNodes(nodes)
		}
		h.r.clock().Sleep(ctx, h.r.poll())
	}
	h.follow.Wait()
	close(h.reports)
	close(h.exited)
	h.keepLogs()
	h.deleteAll(0)
	h.waitGone(ctx)
	if h.aborted && h.r.Store != nil {
		h.r.Store.Delete(ctx, worker.AbortKey(h.id))
	}
	switch {
	case h.refused != nil:
		h.result = h.refused
	case stopped:
		h.result = gang.ErrStopped
	case lost >= 0:
		h.result = &gang.InterruptedError{Node: h.nodes[lost], Reason: lostWhy}
	case infraRank >= 0:
		h.result = &infra.Error{What: infra.StoreDown, Where: fmt.Sprintf("rank %d's node %s", infraRank, h.nodes[infraRank]), Err: fmt.Errorf("gang failed: %s", exitInfra)}
	case failed >= 0:
		h.result = fmt.Errorf("gang failed: %s%s", failure, tail(h.logs[failed].String(), 600))
	}
}

// markAborted marks the gang failed in the store (worker.AbortKey). Without a store, or when
// the mark cannot be written, the rest of the gang is deleted at once instead: killed, it saves
// nothing either.
func (h *handle) markAborted(ctx context.Context) {
	if h.r.Store != nil {
		if _, err := h.r.Store.Put(ctx, worker.AbortKey(h.id), strings.NewReader(h.id)); err == nil {
			h.aborted = true
			return
		}
	}
	h.deleteAll(0)
}

// forgetDeletedNodes deletes at once the gang's pods on nodes that were deleted, as the pod
// garbage collector does: no kubelet is left to end them.
func (h *handle) forgetDeletedNodes(nodes map[string]string) {
	zero := int64(0)
	for rank, name := range h.names {
		if nodes[h.nodes[rank]] == nodeDeleted {
			err := h.r.Client.CoreV1().Pods(h.r.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				h.r.logf("trial %s: delete pod %s of deleted node %s: %v", h.trial, name, h.nodes[rank], err)
			}
		}
	}
}

// nodeDeleted is why a node that is gone from the API is gone.
const nodeDeleted = "node deleted"

// nodeGoing says why a node is going or gone for the gang ("" when it is not).
func (h *handle) nodeGoing(ctx context.Context, name string) string {
	n, err := h.r.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nodeDeleted
	case err != nil:
		return "" // unknown: the next poll reads it again
	}
	return gone(n)
}

// deleteAll deletes the gang's pods: grace -1 with their own grace period (the wrapper saves),
// 0 at once.
func (h *handle) deleteAll(grace int64) {
	opts := metav1.DeleteOptions{}
	if grace >= 0 {
		opts.GracePeriodSeconds = &grace
	}
	for _, name := range h.names {
		err := h.r.Client.CoreV1().Pods(h.r.Namespace).Delete(context.Background(), name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			h.r.logf("trial %s: delete pod %s: %v", h.trial, name, err)
		}
	}
}

// waitGone waits, bounded, until the gang's pods are gone from the API.
func (h *handle) waitGone(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.r.grace()+SaveMargin+30*time.Second)
	defer cancel()
	for {
		pods, err := h.list(ctx)
		left := 0
		for _, p := range pods {
			if p != nil {
				left++
			}
		}
		if err == nil && left == 0 {
			return
		}
		if h.r.clock().Sleep(ctx, h.r.poll()) != nil {
			h.r.logf("trial %s: %d pod(s) of gang %s still there: %v", h.trial, left, h.id, err)
			return
		}
	}
}

// keepLogs appends every worker's output to the trial's log, LogDir/<trial>.log.
func (h *handle) keepLogs() {
	if h.r.LogDir == "" {
		return
	}
	if err := os.MkdirAll(h.r.LogDir, 0o755); err != nil {
		h.r.logf("trial %s: keep its log: %v", h.trial, err)
		return
	}
	f, err := logcap.Open(filepath.Join(h.r.LogDir, h.trial+".log"), h.r.LogMax, 0o600)
	if err != nil {
		h.r.logf("trial %s: keep its log: %v", h.trial, err)
		return
	}
	defer f.Close()
	io.WriteString(f, h.header)
	for rank, l := range h.logs {
		fmt.Fprintf(f, "=== rank %d on node %s, pod %s: stdout and stderr\n", rank, h.nodes[rank], h.names[rank])
		io.WriteString(f, l.String())
	}
}

func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Terminated != nil {
			return c.State.Terminated
		}
	}
	return nil
}

func reason(p *corev1.Pod, t *corev1.ContainerStateTerminated) string {
	switch {
	case t != nil && t.Message != "":
		return " (" + t.Reason + ": " + t.Message + ")"
	case t != nil && t.Reason != "":
		return " (" + t.Reason + ")"
	case p.Status.Reason != "":
		return " (" + p.Status.Reason + ": " + p.Status.Message + ")"
	}
	return ""
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return ":\n" + s
}

// capped is a buffer that keeps the first max bytes written and says how much it dropped.
type capped struct {
	mu      sync.Mutex
	b       bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.b.Len()
	if room >= len(p) {
		c.b.Write(p)
	} else {
		c.b.Write(p[:max(room, 0)])
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 {
		return c.b.String() + fmt.Sprintf("\nrubberband: %d bytes more were dropped\n", c.dropped)
	}
	return c.b.String()
}
