package kubepool

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LeaseName is the name of the Lease that claims a node.
func LeaseName(node string) string { return LeasePrefix + node }

// claim creates the Lease of a node for this run: the API server refuses a second create of a
// name (AlreadyExists), so of two runs claiming one node at once exactly one succeeds.
func (p *Provider) claim(ctx context.Context, node, token string, gpus int) (lease, error) {
	now := metav1.NowMicro()
	holder := p.cfg.RunID
	obj := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(node), Namespace: p.cfg.LeaseNamespace,
			Labels:      map[string]string{LabelRun: p.cfg.RunID, LabelToken: TokenLabel(token)},
			Annotations: map[string]string{LabelToken: token, annotationNode: node, annotationGPUs: strconv.Itoa(gpus)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now},
	}
	got, err := p.cfg.Client.CoordinationV1().Leases(p.cfg.LeaseNamespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return lease{}, err
	}
	return parseLease(got), nil
}

// annotationNode names the node a Lease claims, so that it is read back rather than parsed out
// of the Lease's name.
const annotationNode = "rubberband.dev/node"

// annotationGPUs is the GPUs of the node free of other runs' pods when it was claimed: what the
// run may use of it, kept so that List says the same as Create.
const annotationGPUs = "rubberband.dev/gpus"

// parseLease reads a claim Lease; one without an acquire time bills from its creation.
func parseLease(l *coordinationv1.Lease) lease {
	out := lease{node: l.Annotations[annotationNode], run: l.Labels[LabelRun], token: l.Annotations[LabelToken],
		at: l.CreationTimestamp.Time}
	out.gpus, _ = strconv.Atoi(l.Annotations[annotationGPUs])
	if out.node == "" {
		out.node = strings.TrimPrefix(l.Name, LeasePrefix)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		out.run = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		out.at = l.Spec.AcquireTime.Time
	}
	return out
}

// leases reads every claim Lease of the namespace (any run's: a node another run holds is not
// free).
func (p *Provider) leases(ctx context.Context) ([]lease, error) {
	list, err := p.cfg.Client.CoordinationV1().Leases(p.cfg.LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRun})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	var out []lease
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, LeasePrefix) {
			out = append(out, parseLease(&list.Items[i]))
		}
	}
	return out, nil
}

// release deletes this run's Lease of a node, with preconditions on the UID and resourceVersion
// just read, so that a Lease recreated meanwhile by another run is never deleted. A Lease that
// is gone or another run's is left as it is.
func (p *Provider) release(ctx context.Context, node string) error {
	leases := p.cfg.Client.CoordinationV1().Leases(p.cfg.LeaseNamespace)
	for range 5 {
		l, err := leases.Get(ctx, LeaseName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the lease of %s: %w", node, err)
		}
		if parseLease(l).run != p.cfg.RunID {
			return nil
		}
		uid := types.UID(l.UID)
		err = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &l.ResourceVersion}})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			continue // changed since the read: read it again
		case err != nil:
			return fmt.Errorf("release %s: %w", node, err)
		}
		return nil
	}
	return fmt.Errorf("release %s: its lease kept changing", node)
}
