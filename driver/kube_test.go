package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

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
