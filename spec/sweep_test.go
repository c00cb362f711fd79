package spec

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSweep(t *testing.T) {
	for in, want := range map[string][]string{
		"deadline=10m..30m/10m":                  {"10m0s", "20m0s", "30m0s"},
		"cluster.init_latency.value=1s,10s,100s": {"1s", "10s", "100s"},
		"cluster.data.price_per_gb=0..0.1/0.05":  {"0", "0.05", "0.1"},
		"algorithm.sha.trials=32, 64 ,128":       {"32", "64", "128"},
		"deadline=90m..160m/30m":                 {"1h30m0s", "2h0m0s", "2h30m0s"}, // 160m is not a step
	} {
		sw, err := ParseSweep(in)
		if err != nil || !reflect.DeepEqual(sw.Values, want) {
			t.Errorf("%s: %v %v, want %v", in, sw.Values, err, want)
		}
	}
	for _, bad := range []string{"deadline", "=1,2", "deadline=", "deadline=1m..2m", "deadline=2m..1m/1m", "deadline=1m..2m/0s",
		"x=1..2/s", "x=1,,2", "x=0..1e9/1"} {
		if _, err := ParseSweep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGrid(t *testing.T) {
	g := Grid([]Sweep{{Name: "a", Values: []string{"1", "2"}}, {Name: "b", Values: []string{"x", "y", "z"}}})
	if len(g) != 6 || strings.Join(g[0], "") != "1x" || strings.Join(g[5], "") != "2z" || strings.Join(g[3], "") != "2x" {
		t.Fatalf("grid %v", g)
	}
}

func TestApplyPoint(t *testing.T) {
	data, _ := os.ReadFile("testdata/full.yaml")
	sweeps := []Sweep{{Name: "deadline"}, {Name: "cluster.init_latency.value"}, {Name: "cluster.billing.model"},
		{Name: "algorithm.sha.trials"}, {Name: "cluster.data.price_per_gb"}, {Name: IterLatencyScale}, {Name: "cluster.instance_type"}}
	exp, err := ApplyPoint("full.yaml", data, nil, sweeps, Point{"45m", "100s", "per-function", "64", "0.02", "2", "p3.16xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	if exp.Deadline.D() != 45*time.Minute || exp.Cluster.InitLatency.Value != 100 || exp.Cluster.Billing.Model != PerFunction ||
		exp.Algorithm.SHA.Trials != 64 || exp.Cluster.Data.PricePerGB != 0.02 || exp.Profile.IterLatency[4].Mean != 34 ||
		exp.Cluster.GPUsPerNode != 8 {
		t.Fatalf("applied: %+v %+v", exp.Cluster, exp.Algorithm.SHA)
	}
	exp, err = ApplyPoint("full.yaml", data, nil, []Sweep{{Name: IterLatencyStd}}, Point{"6"})
	if err != nil || exp.Profile.IterLatency[1].Std != 6 || exp.Profile.IterLatency[4].Std != 6*17.0/60 {
		t.Fatalf("std sweep: %+v %v", exp.Profile.IterLatency, err)
	}
	// A bad value is a spec error naming the field.
	_, err = ApplyPoint("full.yaml", data, nil, []Sweep{{Name: "cluster.billing.model"}}, Point{"by-the-minute"})
	if err == nil || !strings.Contains(err.Error(), "cluster.billing.model") {
		t.Fatalf("bad value: %v", err)
	}
	_, err = ApplyPoint("full.yaml", data, nil, []Sweep{{Name: "cluster.colour"}}, Point{"red"})
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown field: %v", err)
	}
}
