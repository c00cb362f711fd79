package ec2

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

func TestAttempts(t *testing.T) {
	subnets := []string{"a", "b"}
	for _, c := range []struct {
		market   cloud.Market
		fallback string
		want     string
	}{
		{cloud.OnDemand, spec.FallbackOnDemand, "[{a on-demand} {b on-demand}]"},
		{cloud.Spot, spec.FallbackOnDemand, "[{a spot} {b spot} {a on-demand} {b on-demand}]"},
		{cloud.Spot, spec.FallbackNone, "[{a spot} {b spot}]"},
	} {
		if got := fmt.Sprint(attempts(subnets, c.market, c.fallback)); got != c.want {
			t.Errorf("%s with fallback %s: %s, want %s", c.market, c.fallback, got, c.want)
		}
	}
}

// Tokens are the same for the same run, key and index, differ otherwise, and always fit EC2's
// 64 printable ASCII characters; so do the node names made from them.
func TestClientToken(t *testing.T) {
	const run = "r20250101-000000-0a1b2c3d"
	if got := clientToken(run, "b0-s1", 2); got != run+"-b0-s1-2" {
		t.Errorf("short token %q", got)
	}
	seen := map[string]bool{}
	for _, key := range []string{"b0-s1", strings.Repeat("k", 80), "clé ünïcode", "with space"} {
		for i := range 3 {
			tok := clientToken(run, key, i)
			if tok != clientToken(run, key, i) || seen[tok] || len(tok) > maxClientToken || !printableASCII(tok) {
				t.Errorf("token %q of (%q, %d): want stable, unique, at most 64 printable ASCII", tok, key, i)
			}
			seen[tok] = true
			if clientToken("r-other", key, i) == tok {
				t.Errorf("two runs share token %q", tok)
			}
			if name := nodeName(run, tok); !strings.HasPrefix(name, run+"-n") || name != nodeName(run, tok) {
				t.Errorf("node name %q", name)
			}
		}
	}
}

func TestTagsInStableOrder(t *testing.T) {
	k := Kind{InstanceType: "g3.8xlarge", GPUsPerNode: 2, OnDemandPrice: 2.28, SpotPrice: 0.69}
	got := tags("exp", "run", "node", k, cloud.Spot, map[string]string{"z": "1", "a": "2"})
	want := [][2]string{{TagExperiment, "exp"}, {TagRun, "run"}, {TagNode, "node"}, {"Name", "node"},
		{TagGPUs, "2"}, {TagPrice, "0.69"}, {"a", "2"}, {"z", "1"}}
	if !slices.Equal(got, want) {
		t.Fatalf("tags %v, want %v", got, want)
	}
}

func TestClassify(t *testing.T) {
	for code, want := range map[string]kind{
		"InsufficientInstanceCapacity": kindCapacity, "SpotMaxPriceTooLow": kindCapacity,
		"MaxSpotInstanceCountExceeded": kindCapacity, "Unsupported": kindCapacity, "InsufficientCapacity": kindCapacity,
		"VcpuLimitExceeded": kindQuota, "IdempotentParameterMismatch": kindMismatch,
		"UnauthorizedOperation": kindOther, "InvalidAMIID.NotFound": kindOther, "": kindOther,
	} {
		if got := classify(code); got != want {
			t.Errorf("classify(%q) = %v, want %v", code, got, want)
		}
	}
}

func TestQuotaFor(t *testing.T) {
	for _, c := range []struct {
		typ    string
		market cloud.Market
		want   string
	}{
		{"p3.2xlarge", cloud.OnDemand, "L-417A185B"}, {"p4d.24xlarge", cloud.Spot, "L-7212CCBC"},
		{"g4dn.xlarge", cloud.OnDemand, "L-DB2E81BA"}, {"g5.xlarge", cloud.Spot, "L-3819A6DF"},
		{"vt1.3xlarge", cloud.OnDemand, "L-DB2E81BA"},
		{"c5.large", cloud.OnDemand, "L-1216C47A"}, {"t3.micro", cloud.Spot, "L-34B43A08"},
		{"inf2.xlarge", cloud.OnDemand, ""}, {"trn1.2xlarge", cloud.OnDemand, ""}, {"x2idn.large", cloud.OnDemand, ""},
	} {
		q, ok := quotaFor(c.typ, c.market)
		if q.code != c.want || ok != (c.want != "") {
			t.Errorf("quota of %s %s: %q (%v), want %q", c.market, c.typ, q.code, ok, c.want)
		}
	}
}

func TestCapacityErrorNamesWhatWasTried(t *testing.T) {
	err := capacityError("p3.2xlarge", cloud.Spot, []failure{
		{attempt{"subnet-a", cloud.Spot}, "InsufficientInstanceCapacity", ""},
		{attempt{"subnet-b", cloud.Spot}, "SpotMaxPriceTooLow", ""},
		{attempt{"subnet-a", cloud.OnDemand}, "InsufficientInstanceCapacity", ""},
	})
	want := "no spot p3.2xlarge capacity in subnets subnet-a, subnet-b: spot subnet-a: InsufficientInstanceCapacity; " +
		"spot subnet-b: SpotMaxPriceTooLow; on-demand subnet-a: InsufficientInstanceCapacity"
	if err.Error() != want {
		t.Fatalf("%q\nwant %q", err, want)
	}
}
