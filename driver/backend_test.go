package driver

import (
	"errors"
	"testing"
)

// caps is what a Kind can do, comparable.
type caps struct{ localTrainers, remote, sharesNoDisk, simulated, outlivesRun bool }

func capsOf(k Kind) caps {
	return caps{k.LocalTrainers, k.Remote, k.SharesNoDisk, k.Simulated, k.OutlivesRun}
}

// The registry holds every backend once, in --backend's order, each with what it can do: what
// the sites that once compared names asked of each (the subreaper and a server's sandbox of
// local; the shipped code and heartbeat of nomad and ec2; ec2's diskless profile and cleanup;
// virtual's simulation), and capabilities that agree with each other.
func TestRegistry(t *testing.T) {
	want := []struct {
		name string
		caps caps
	}{
		{Local, caps{localTrainers: true}},
		{Nomad, caps{remote: true}},
		{EC2, caps{remote: true, sharesNoDisk: true, outlivesRun: true}},
		{Kube, caps{remote: true}},
		{Virtual, caps{simulated: true}},
	}
	kinds := Kinds()
	if len(kinds) != len(want) {
		t.Fatalf("%d backends, want %d", len(kinds), len(want))
	}
	for i, k := range kinds {
		if k.Name != want[i].name || capsOf(k) != want[i].caps {
			t.Errorf("backend %d: %s %+v, want %s %+v", i, k.Name, capsOf(k), want[i].name, want[i].caps)
		}
		if k.Usage == "" || k.check == nil || k.open == nil {
			t.Errorf("%s: a usage, a check and an open are every backend's", k.Name)
		}
		got, err := Lookup(k.Name)
		if err != nil || got.Name != k.Name || capsOf(got) != capsOf(k) {
			t.Errorf("Lookup(%q): %s %+v, %v", k.Name, got.Name, capsOf(got), err)
		}
		switch {
		case k.Remote && (k.LocalTrainers || k.Simulated): // its store and heartbeat need a real, remote run
			t.Errorf("%s: remote, and local or simulated", k.Name)
		case k.SharesNoDisk && !k.Remote, k.OutlivesRun && !k.Remote:
			t.Errorf("%s: diskless or outliving nodes, not remote", k.Name)
		case k.Simulated && k.LocalTrainers:
			t.Errorf("%s: simulated trainers run as processes", k.Name)
		}
	}
}

// Lookup refuses an unknown name as input, naming every backend; Names and Usage say them as
// --backend's help and its errors do.
func TestLookupNamesUsage(t *testing.T) {
	if _, err := Lookup("virtualbox"); !errors.Is(err, ErrInput) || err.Error() != `--backend "virtualbox" is not a backend (local, nomad, ec2, kube or virtual)` {
		t.Errorf("unknown: %v", err)
	}
	for _, tc := range []struct {
		keep func(Kind) bool
		want string
	}{
		{nil, "local, nomad, ec2, kube or virtual"},
		{func(k Kind) bool { return k.OutlivesRun }, "ec2"},
		{func(k Kind) bool { return !k.Simulated }, "local, nomad, ec2 or kube"},
		{func(k Kind) bool { return k.Simulated }, "virtual"},
		{func(Kind) bool { return false }, ""},
	} {
		if got := Names(tc.keep); got != tc.want {
			t.Errorf("Names: %q, want %q", got, tc.want)
		}
	}
	const help = "local (processes on this machine), nomad (NOMAD_ADDR's cluster, or a local server started for you; with cluster.nomad, the team's own clients: docs/nomad.md), " +
		"ec2 (EC2 instances as Nomad clients: docs/ec2.md), kube (pods on the Kubernetes cluster of KUBECONFIG (or in-cluster), on a team's node pool or Karpenter's nodes: docs/kubernetes.md) or virtual (the run in virtual time, drawn from the spec's model: docs/virtual.md)"
	if got := Usage(); got != help {
		t.Errorf("Usage:\n%s\nwant\n%s", got, help)
	}
}
