package nomadpool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadpool"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/spec"
)

// team is a Nomad server with client agents started beforehand, as a team's cluster: three match
// the pool, and four differ from them in one thing each.
type team struct {
	n        *servers.Nomad
	matching []string          // node IDs, by name
	names    map[string]string // node ID -> agent name
	pool     spec.NomadPool
}

func startTeam(t *testing.T) team {
	n := servers.StartNomad(t)
	tm := team{n: n, names: map[string]string{}, pool: spec.NomadPool{NodePool: "gpu", Class: "a100", Meta: map[string]string{"team": "ml"}}}
	ml := func(gpus string) map[string]string { return map[string]string{"team": "ml", "gpus": gpus} }
	for _, c := range []servers.TeamClient{
		{Name: "gpu-1", NodePool: "gpu", Class: "a100", Meta: ml("2")},
		{Name: "gpu-2", NodePool: "gpu", Class: "a100", Meta: ml("2")},
		{Name: "gpu-3", NodePool: "gpu", Class: "a100", Meta: ml("2")},
		{Name: "other-pool", NodePool: "default", Class: "a100", Meta: ml("2")},
		{Name: "other-class", NodePool: "gpu", Class: "t4", Meta: ml("2")},
		{Name: "other-team", NodePool: "gpu", Class: "a100", Meta: map[string]string{"team": "web", "gpus": "2"}},
		{Name: "one-gpu", NodePool: "gpu", Class: "a100", Meta: ml("1")},
	} {
		id := n.AddTeamClient(c)
		tm.names[id] = c.Name
		if strings.HasPrefix(c.Name, "gpu-") {
			tm.matching = append(tm.matching, id)
		}
	}
	return tm
}

func (tm team) provider(t *testing.T, run string) *nomadpool.Provider {
	t.Helper()
	p, err := nomadpool.New(context.Background(), nomadpool.Config{Client: tm.n.Client, RunID: run, Experiment: "exp", Pool: tm.pool,
		GPUsPerNode: 2, PricePerHour: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// claims is the claim variables in the cluster: node ID -> run.
func (tm team) claims(t *testing.T) map[string]string {
	t.Helper()
	metas, _, err := tm.n.Client.Variables().PrefixList(nomadpool.ClaimPrefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range metas {
		v, _, err := tm.n.Client.Variables().Read(m.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(m.Path, nomadpool.ClaimPrefix)] = v.Items["run"]
	}
	return out
}

// agentsRun fails the test unless every agent of the team still runs and is ready: the provider
// claims and releases, and never stops one.
func (tm team) agentsRun(t *testing.T) {
	t.Helper()
	nodes, _, err := tm.n.Client.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, n := range nodes {
		status[n.ID] = n.Status
	}
	for id, name := range tm.names {
		if !tm.n.Running(name) || status[id] != nomad.NodeStatusReady {
			t.Errorf("agent %s: running %v, node status %q", name, tm.n.Running(name), status[id])
		}
	}
}

func ids(nodes []cloud.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	slices.Sort(out)
	return out
}

var offer = cloud.Offer{InstanceType: "team-a100", Market: cloud.OnDemand, PricePerHour: 0.8}

func TestNomadPool(t *testing.T) {
	tm := startTeam(t)
	// The Provider contract over the three matching clients, a fresh run ID per case.
	t.Run("Contract", func(t *testing.T) {
		runs := 0
		providertest.Run(t, providertest.Harness{
			New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
				runs++
				cfg := nomadpool.Config{Client: tm.n.Client, RunID: fmt.Sprintf("contract-%d", runs), Pool: tm.pool, GPUsPerNode: 2,
					InstanceType: offer.InstanceType, PricePerHour: offer.PricePerHour}
				open := func(t *testing.T) cloud.Provider {
					p, err := nomadpool.New(context.Background(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
				return open(t), open
			},
			GPUsPerNode: 2,
			Offer:       offer,
			Reclaims:    true,
		})
		if left := tm.claims(t); len(left) != 0 {
			t.Fatalf("claims left after the contract: %v", left)
		}
	})
	t.Run("ClaimsOnlyMatchingExclusively", func(t *testing.T) { claimsOnlyMatchingExclusively(t, tm) })
	t.Run("ConcurrentDriversNeverShare", func(t *testing.T) { concurrentDriversNeverShare(t, tm) })
	t.Run("LostClientIsForgotten", func(t *testing.T) { lostClientIsForgotten(t, tm) })
}

// A run claims only matching clients, described as the pool's; a repeated request gives back
// what its token claimed; another run cannot claim them and is told how many matched and were
// free; a release makes a client claimable; and no agent is ever stopped.
func claimsOnlyMatchingExclusively(t *testing.T, tm team) {
	ctx := context.Background()
	a, b := tm.provider(t, "run-a"), tm.provider(t, "run-b")
	before := time.Now()
	got, err := a.Create(ctx, cloud.Request{Count: 2, Token: "b0-r1"})
	if err != nil || len(got) != 2 {
		t.Fatalf("create 2: %v, %v", got, err)
	}
	for _, n := range got {
		if !slices.Contains(tm.matching, n.ID) {
			t.Fatalf("claimed %s (%s), which does not match the pool", n.ID, tm.names[n.ID])
		}
		if n.GPUs != 2 || n.Addr != "127.0.0.1" || n.InstanceType != "a100" || n.Market != cloud.OnDemand || n.PricePerHour != 1.5 ||
			n.RunningAt.Before(before) {
			t.Fatalf("node %+v", n)
		}
	}
	again, err := a.Create(ctx, cloud.Request{Count: 2, Token: "b0-r1"})
	if err != nil || !slices.Equal(ids(again), ids(got)) {
		t.Fatalf("the repeated request got %v (%v), the first %v", ids(again), err, ids(got))
	}
	if claims := tm.claims(t); len(claims) != 2 {
		t.Fatalf("claims after a repeated request: %v", claims)
	}

	// The other run gets the one matching client left, and a capacity error for the second.
	other, err := b.Create(ctx, cloud.Request{Count: 2})
	var capacity *cloud.CapacityError
	if !errors.As(err, &capacity) || len(other) != 1 || slices.Contains(ids(got), other[0].ID) || !slices.Contains(tm.matching, other[0].ID) {
		t.Fatalf("the second run got %v with %v; want the third matching client and a capacity error", ids(other), err)
	}
	if !strings.Contains(capacity.Reason, "3 client(s)") || !strings.Contains(capacity.Reason, "1 of them free") || !strings.Contains(capacity.Reason, "2 wanted") {
		t.Fatalf("capacity error %q: want 3 matching, 1 free, 2 wanted", capacity.Reason)
	}
	none, err := b.Create(ctx, cloud.Request{Count: 1})
	if !errors.As(err, &capacity) || len(none) != 0 {
		t.Fatalf("with every client claimed: %v, %v", none, err)
	}

	// Another run's release of a's client does nothing; a's own makes it b's to claim.
	if err := b.Delete(ctx, []string{got[0].ID}); err != nil {
		t.Fatal(err)
	}
	if held, _ := a.List(ctx); !slices.Equal(ids(held), ids(got)) {
		t.Fatalf("a holds %v after b released one of them, want %v", ids(held), ids(got))
	}
	if err := a.Delete(ctx, []string{got[0].ID}); err != nil {
		t.Fatal(err)
	}
	taken, err := b.Create(ctx, cloud.Request{Count: 1})
	if err != nil || len(taken) != 1 || taken[0].ID != got[0].ID {
		t.Fatalf("after a's release b got %v, %v; want %s", ids(taken), err, got[0].ID)
	}
	if claims := tm.claims(t); claims[got[0].ID] != "run-b" || claims[got[1].ID] != "run-a" || len(claims) != 3 {
		t.Fatalf("claims %v", claims)
	}
	for _, p := range []*nomadpool.Provider{a, b} {
		held, _ := p.List(ctx)
		if err := p.Delete(ctx, ids(held)); err != nil {
			t.Fatal(err)
		}
	}
	if left := tm.claims(t); len(left) != 0 {
		t.Fatalf("claims left: %v", left)
	}
	tm.agentsRun(t)
}

// Two drivers asking for every client at once: each client goes to exactly one of them, whatever
// the interleaving (check-and-set on the claim's creation).
func concurrentDriversNeverShare(t *testing.T, tm team) {
	ctx := context.Background()
	for round := range 5 {
		ps := []*nomadpool.Provider{tm.provider(t, fmt.Sprintf("race-%d-a", round)), tm.provider(t, fmt.Sprintf("race-%d-b", round))}
		got := make([][]cloud.Node, 2)
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], _ = p.Create(ctx, cloud.Request{Count: 3})
			}()
		}
		wg.Wait()
		all := append(ids(got[0]), ids(got[1])...)
		slices.Sort(all)
		want := slices.Clone(tm.matching)
		slices.Sort(want)
		if !slices.Equal(all, want) {
			t.Fatalf("round %d: the drivers got %v and %v; want each of %v exactly once", round, ids(got[0]), ids(got[1]), want)
		}
		for i, p := range ps {
			if err := p.Delete(ctx, ids(got[i])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if left := tm.claims(t); len(left) != 0 {
		t.Fatalf("claims left: %v", left)
	}
}

// A claimed client whose agent dies is not listed once Nomad marks it down, and its claim is
// deleted; the other claim stays.
func lostClientIsForgotten(t *testing.T, tm team) {
	ctx := context.Background()
	doomed := tm.n.AddTeamClient(servers.TeamClient{Name: "gpu-doomed", NodePool: "gpu", Class: "a100", Meta: map[string]string{"team": "ml", "gpus": "2"}})
	p := tm.provider(t, "run-lost")
	got, err := p.Create(ctx, cloud.Request{Count: 4})
	if err != nil || !slices.Contains(ids(got), doomed) {
		t.Fatalf("create 4 of 4: %v, %v", ids(got), err)
	}
	tm.n.KillClient("gpu-doomed")
	deadline := time.Now().Add(60 * time.Second)
	for {
		held, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids(held), doomed) {
			if len(held) != 3 {
				t.Fatalf("held %v after losing %s, want the other three", ids(held), doomed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed a minute after its agent died", doomed)
		}
		time.Sleep(250 * time.Millisecond)
	}
	claims := tm.claims(t)
	if _, ok := claims[doomed]; ok || len(claims) != 3 {
		t.Fatalf("claims %v: the lost client's should be gone, the rest kept", claims)
	}
	if err := p.Delete(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if left := tm.claims(t); len(left) != 0 {
		t.Fatalf("claims left: %v", left)
	}
	tm.agentsRun(t)
}
