package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
	"github.com/rubberband-hpo/rubberband/executor/kube"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// checkKube says what a kube run lacks: the cluster.kubernetes block that says where its pods
// and nodes are.
func checkKube(exp *spec.Experiment) error {
	k := exp.Cluster.Kubernetes
	if k == nil {
		return inputErr("--backend kube needs cluster.kubernetes: the namespace, and the nodes, a pool chosen by labels " +
			"({node_selector: {rubberband.dev/pool: gpu}}) or Karpenter NodeClaims ({nodes: karpenter, node_class: ...}): docs/kubernetes.md")
	}
	if k.KubeNodes() == spec.KubeNodesPool && len(exp.Cluster.InstanceTypes) > 1 {
		return inputErr("cluster.kubernetes: a node pool is nodes of one instance type (cluster.instance_type), and cluster.instance_types lists %d: "+
			"use nodes: karpenter to rent several types, or list one", len(exp.Cluster.InstanceTypes))
	}
	return nil
}

// openKube runs gangs as pods of the cluster KUBECONFIG (or the pod's own service account)
// names, in cluster.kubernetes.namespace, on nodes of a team's pool claimed by Leases or on
// nodes Karpenter brings up for NodeClaims. Before anything is rented, the namespace's quotas
// must fit the plan's peak.
func openKube(ctx context.Context, t target) (*Backend, error) {
	if err := checkKube(t.exp); err != nil {
		return nil, err
	}
	k := t.exp.Cluster.Kubernetes
	if err := servedKube(k, t.served); err != nil {
		return nil, err
	}
	cfg, namespace, err := kube.Config("", "")
	if err != nil {
		return nil, inputErr("--backend kube: %v", err)
	}
	if k.Namespace != "" {
		namespace = k.Namespace
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if err := checkKubeQuotas(ctx, client, namespace, t); err != nil {
		return nil, err
	}
	m, err := sim.NewModel(t.exp)
	if err != nil {
		return nil, err
	}
	price := kubePrices(t.exp, m)
	if w := kubeNoticeWarning(t.exp, m); w != "" {
		fmt.Fprintln(t.log, w)
	}
	var provider cloud.Provider
	switch k.KubeNodes() {
	case spec.KubeNodesKarpenter:
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		var offers []cloud.Offer
		for _, o := range m.Offers {
			offers = append(offers, offerOf(t.exp, o))
		}
		provider, err = karpenter.New(karpenter.Config{Client: client, Dynamic: dyn, RunID: t.runID,
			NodeClass:   karpenter.NodeClassRef{Group: k.NodeClass.Group, Kind: k.NodeClass.Kind, Name: k.NodeClass.Name},
			GPUsPerNode: t.exp.Cluster.GPUsPerNode, Offers: offers})
		if err != nil {
			return nil, err
		}
	default:
		leases := k.LeaseNamespace
		if leases == "" {
			leases = namespace
		}
		offer := offerOf(t.exp, m.Offer)
		provider, err = kubepool.New(kubepool.Config{Client: client, LeaseNamespace: leases, Selector: labels.SelectorFromSet(k.NodeSelector),
			RunID: t.runID, GPUsPerNode: t.exp.Cluster.GPUsPerNode, InstanceType: offer.InstanceType, Market: offer.Market,
			OnDemandPrice: price(offer.InstanceType, cloud.OnDemand), SpotPrice: price(offer.InstanceType, cloud.Spot)})
		if err != nil {
			return nil, err
		}
	}
	env, err := t.checkpoints().Env()
	if err != nil {
		return nil, err
	}
	store, err := t.checkpoints().Open(ctx)
	if err != nil {
		return nil, err
	}
	self := t.self
	if k.Image != "" {
		self = kube.ImageBinary // the runner image holds it there
	}
	rt := &kube.Runtime{Client: client, Namespace: namespace, Experiment: t.exp.Name, RunID: t.runID, Self: self, StoreEnv: env, Code: t.code,
		ExtraEnv: []string{fmt.Sprintf("RB_TIME_SCALE=%g", t.timeScale)}, Secrets: kubeSecrets(t.exp, t.served),
		ServiceAccount: k.ServiceAccount, TrainerSecret: k.TrainerSecret, RunnerImage: k.Image, Store: store,
		LogDir: filepath.Join(t.dir, rundir.LogsDir), LogMax: t.logMax, Log: t.log}
	closeRuntime := func() { rt.Close(context.WithoutCancel(ctx)) }
	return &Backend{Provider: provider, Runtime: rt, close: []func(){closeRuntime}}, nil
}

// servedKube refuses, for a server's run, what would let one team's spec reach past its run: a
// namespace or lease namespace of its choosing (another team's pods, Secrets, Leases), and a
// trainer_secret (which Secret of the server's namespace is handed to the trainer is the
// server's to say, not a spec's). A server's runs go to the server's own namespace.
func servedKube(k *spec.Kubernetes, served bool) error {
	if !served {
		return nil
	}
	for _, f := range []struct{ field, value string }{{"namespace", k.Namespace}, {"lease_namespace", k.LeaseNamespace}, {"trainer_secret", k.TrainerSecret}} {
		if f.value != "" {
			return inputErr("cluster.kubernetes.%s: a server's runs go to the server's own namespace, with its credentials; a spec sent to a server may not choose its %s (%q)",
				f.field, strings.ReplaceAll(f.field, "_", " "), f.value)
		}
	}
	return nil
}

// checkKubeQuotas refuses a plan whose peak GPUs one of the namespace's ResourceQuotas cannot
// fit, naming the quota; a driver not allowed to read quotas is told which rule it lacks.
func checkKubeQuotas(ctx context.Context, client kubernetes.Interface, namespace string, t target) error {
	quotas, err := client.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("read the quotas of namespace %s (`rubberband kube-rbac` prints the Role the driver needs): %w", namespace, err)
	}
	if err := admit.CheckQuotas(quotas.Items, admit.Peak{GPUs: peakNodes(t.alloc) * max(t.exp.Cluster.GPUsPerNode, 1)}); err != nil {
		return inputErr("%v", err)
	}
	return nil
}

// peakNodes is the most nodes the plan holds at once: brackets run side by side, so a stage's
// nodes are summed over brackets.
func peakNodes(a sim.Alloc) int {
	peak := 0
	for k := 0; ; k++ {
		sum, any := 0, false
		for _, stages := range a {
			if k < len(stages) {
				sum += stages[k].Nodes
				any = true
			}
		}
		if !any {
			return peak
		}
		peak = max(peak, sum)
	}
}

// kubePrices prices a node by its instance type and market, from the model's offers (the
// spec's cluster and instance_types); a type the spec does not name costs the cluster's own.
func kubePrices(exp *spec.Experiment, m *sim.Model) func(instanceType string, market cloud.Market) float64 {
	return func(instanceType string, market cloud.Market) float64 {
		fallback := -1.0
		for _, offer := range m.Offers {
			o := offerOf(exp, offer)
			if o.InstanceType == instanceType && o.Market == market {
				return o.PricePerHour
			}
			if o.InstanceType == exp.Cluster.InstanceType && o.Market == market {
				fallback = o.PricePerHour
			}
		}
		if fallback < 0 {
			return offerOf(exp, m.Offer).PricePerHour
		}
		return fallback
	}
}

// kubeSecrets are the checkpoint store's credentials the workers' pods need, which inherit
// nothing from this machine: the AWS variables for an s3:// store, which the runtime keeps in
// the run's Secret. A server's run gets none of the driver's (its trainer_secret gives them).
func kubeSecrets(exp *spec.Experiment, served bool) []string {
	if served || !strings.HasPrefix(exp.Checkpoints.URL, "s3://") {
		return nil
	}
	var out []string
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// kubeNoticeWarning says when a plan counts on training through spot notices that Kubernetes
// does not give: a reclaimed node is drained at once (Karpenter's interruption handling, the
// node termination handler), its gangs stopped at the taint.
func kubeNoticeWarning(exp *spec.Experiment, m *sim.Model) string {
	notice := exp.Cluster.Spot.Notice
	if notice <= 0 || !slices.ContainsFunc(m.Offers, func(o *sim.Offer) bool { return o.Spot != nil }) {
		return ""
	}
	return fmt.Sprintf("kube: a spot node is drained as soon as it is reclaimed, but the plan counts on training through a %s notice (cluster.spot.notice): "+
		"its interruptions will cost more than predicted; plan with `notice: 0s` on Kubernetes", notice.D())
}
