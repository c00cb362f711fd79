package spec

import (
	"testing"
)

const typesBase = `name: x
objective: {metric: m}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}
profile: {iter_latency: {1: {mean: 1}}}
`

// Candidates take what they leave out from the catalog, the cluster's latencies and spot
// discount and the spec's profile; the default type is the first candidate unless named, and the
// cluster's own fields are the default type's. Offers lists every type in every market, the
// default type and market first.
func TestInstanceTypesDefaults(t *testing.T) {
	src := typesBase + `cluster:
  instance_type: p3.8xlarge
  instance_types:
    - {instance_type: p3.2xlarge}
    - {instance_type: p3.8xlarge, init_latency: {value: 5s}}
    - {instance_type: mine, gpus_per_node: 2, price_per_hour: 2, profile: {iter_latency: {1: {mean: 3}}}}
  markets: [on-demand, spot]
  spot: {discount: 0.75}
  scale_latency: {value: 20s}
`
	exp, err := Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := exp.Candidate("p3.2xlarge")
	if small.GPUsPerNode != 1 || small.PricePerHour != 3.06 || small.SpotPricePerHour != 3.06*0.25 || small.NetworkGbps != 10 ||
		small.ScaleLatency.Value != 20 || small.Profile.IterLatency[1].Mean != 1 {
		t.Fatalf("p3.2xlarge %+v", small)
	}
	def, _ := exp.Candidate("")
	if def.InstanceType != "p3.8xlarge" || def.InitLatency.Value != 5 || exp.Cluster.GPUsPerNode != 4 || exp.Cluster.PricePerHour != 12.24 || exp.Cluster.Market != MarketOnDemand {
		t.Fatalf("default type %+v, cluster %+v", def, exp.Cluster)
	}
	mine, _ := exp.Candidate("mine")
	if mine.GPUsPerNode != 2 || mine.SpotPricePerHour != 0.5 || mine.Profile.IterLatency[1].Mean != 3 {
		t.Fatalf("mine %+v", mine)
	}
	offers := exp.Offers()
	if len(offers) != 6 || offers[0].Type.InstanceType != "p3.8xlarge" || offers[0].Market != MarketOnDemand {
		t.Fatalf("offers %+v", offers)
	}
	// Without instance_type the first candidate is the default.
	exp, err = Parse("t.yaml", []byte(typesBase+"cluster: {instance_types: [{instance_type: p3.16xlarge}, {instance_type: p3.2xlarge}]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Cluster.InstanceType != "p3.16xlarge" || exp.Cluster.GPUsPerNode != 8 || len(exp.Offers()) != 2 {
		t.Fatalf("cluster %+v, %d offers", exp.Cluster, len(exp.Offers()))
	}
}

// Every problem of the candidates comes at once, each at its field and line.
func TestInstanceTypesProblems(t *testing.T) {
	src := typesBase + `cluster:
  instance_type: p3dn.24xlarge
  gpus_per_node: 4
  instance_types:
    - {instance_type: p3.8xlarge}
    - {instance_type: nowhere}
    - {instance_type: p3.8xlarge, gpus_per_node: 0}
    - {gpus_per_node: 1, price_per_hour: 1, spot_price_per_hour: 1, scale_latency: {dist: normal, mean: -1}}
    - {instance_type: p2.xlarge}
  markets: [on-demand, spot, spot, cheap]
`
	_, err := Parse("t.yaml", []byte(src), nil)
	got := map[string]int{}
	for _, p := range problems(t, err) {
		got[p.Path] = p.Line
	}
	want := map[string]int{
		"cluster.gpus_per_node":                         7,
		"cluster.instance_type":                         6,
		"cluster.instance_types[1].instance_type":       10,
		"cluster.instance_types[2].instance_type":       11,
		"cluster.instance_types[2].gpus_per_node":       11,
		"cluster.instance_types[3].instance_type":       12,
		"cluster.instance_types[3].scale_latency.mean":  12,
		"cluster.instance_types[4].spot_price_per_hour": 13,
		"cluster.markets[2]":                            14,
		"cluster.markets[3]":                            14,
	}
	for path, line := range want {
		if got[path] != line {
			t.Errorf("%s: line %d, want %d", path, got[path], line)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want %v", got, want)
	}
}
