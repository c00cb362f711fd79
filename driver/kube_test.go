package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A spec sent to a server cannot pick the namespace, the lease namespace or the Secret handed to
// its trainer (another team's); refused before the cluster is asked anything. Run locally, the
// same spec may.
func TestServedKubeRunStaysInTheServersNamespace(t *testing.T) {
	for _, k := range []spec.Kubernetes{
		{Namespace: "team-b", NodeSelector: map[string]string{"a": "b"}},
		{LeaseNamespace: "team-b", NodeSelector: map[string]string{"a": "b"}},
		{TrainerSecret: "team-b-wandb", NodeSelector: map[string]string{"a": "b"}},
	} {
		exp := &spec.Experiment{Cluster: spec.Cluster{Kubernetes: &k}}
		t.Setenv("KUBECONFIG", "/nonexistent") // asking the cluster would fail otherwise
		_, err := openKube(context.Background(), target{exp: exp, served: true})
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "server's own namespace") || !strings.Contains(err.Error(), "team-b") {
			t.Errorf("%+v served: %v", k, err)
		}
		if err := servedKube(&k, false); err != nil {
			t.Errorf("%+v run locally: %v", k, err)
		}
	}
}

// A plan that counts on training through spot notices is warned of on Kubernetes, which drains a
// reclaimed node at once; not with `notice: 0s`, nor without spot nodes.
func TestKubeWarnsOfNoticesItDoesNotGive(t *testing.T) {
	for _, tc := range []struct {
		edit string
		warn bool
	}{{"", true}, {"notice: 0s", false}, {"market: on-demand", false}} {
		exp, err := spec.Load("../examples/paper/table2-spot.yaml")
		if err != nil {
			t.Fatal(err)
		}
		switch tc.edit {
		case "notice: 0s":
			exp.Cluster.Spot.Notice = 0
		case "market: on-demand":
			exp.Cluster.Market = spec.MarketOnDemand
		}
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		if w := kubeNoticeWarning(exp, m); (w != "") != tc.warn || tc.warn && !strings.Contains(w, "notice: 0s") {
			t.Errorf("%q: warning %q, want one: %v", tc.edit, w, tc.warn)
		}
	}
}
