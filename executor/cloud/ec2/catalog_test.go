package ec2_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A refresh through the real SDK gives every GPU type the fake serves, with the GPUs, model,
// memory, shape and network DescribeInstanceTypes says and the price the price list gives for
// the region, and no type without GPUs.
func TestRefreshCatalog(t *testing.T) {
	types := append(ec2sim.DefaultInstanceTypes(),
		ec2sim.InstanceType{Name: "p5e.48xlarge", VCPUs: 192, MemoryMiB: 2 << 20, GPUs: 8, GPUModel: "H200", GPUMemoryMiB: 144384})
	startSim(t, ec2sim.Config{Region: "us-west-2", InstanceTypes: types})
	at := time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC)
	r, err := rbec2.RefreshCatalog(t.Context(), awsConfig(t), "us-west-2", at)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]spec.InstanceType{}
	for _, it := range r.File.InstanceTypes {
		got[it.Name] = it
	}
	want := 0
	for _, ft := range ec2sim.DefaultInstanceTypes() {
		it, ok := got[ft.Name]
		if ft.GPUs == 0 {
			if ok {
				t.Errorf("%s has no GPU but is in the catalog", ft.Name)
			}
			continue
		}
		want++
		if !ok {
			t.Errorf("%s is missing", ft.Name)
			continue
		}
		if it.GPUs != ft.GPUs || it.GPUModel != ft.GPUModel || it.GPUMemoryGiB != float64(ft.GPUMemoryMiB)/1024 ||
			it.VCPUs != ft.VCPUs || it.MemoryGiB != float64(ft.MemoryMiB)/1024 || it.NetworkGbps != ft.NetworkGbps ||
			it.PricePerHour != ft.OnDemandPrice || it.SpotPricePerHour != 0 {
			t.Errorf("%s: %+v, the fake serves %+v", ft.Name, it, ft)
		}
		if it.Source != "DescribeInstanceTypes + Pricing API, us-west-2, fetched 2026-08-06T12:00:00Z" {
			t.Errorf("%s source %q", ft.Name, it.Source)
		}
	}
	if len(r.File.InstanceTypes) != want || r.File.Region != "us-west-2" || !r.File.FetchedAt.Equal(at) {
		t.Errorf("%d types in %s at %v, want %d", len(r.File.InstanceTypes), r.File.Region, r.File.FetchedAt, want)
	}
	// Served with no price (Capacity Blocks only): left out, and said so.
	if len(r.Skipped) != 1 || !strings.HasPrefix(r.Skipped[0], "p5e.48xlarge: the price list has no Linux on-demand price") {
		t.Errorf("skipped %q", r.Skipped)
	}
	// What was read is a catalog file that reads back.
	data, err := r.File.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spec.ParseCatalogFile("refreshed", data); err != nil {
		t.Error(err)
	}
}

// A refresh whose price list cannot be read fails, naming the call and AWS's code: it writes
// no catalog that silently lacks prices.
func TestRefreshCatalogFails(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.Deny("GetProducts", true)
	_, err := rbec2.RefreshCatalog(t.Context(), awsConfig(t), "us-east-1", time.Now())
	mustContain(t, err, "catalog refresh", "GetProducts", "AccessDeniedException")
	s.Deny("GetProducts", false)
	s.Deny("DescribeInstanceTypes", true)
	_, err = rbec2.RefreshCatalog(t.Context(), awsConfig(t), "us-east-1", time.Now())
	mustContain(t, err, "DescribeInstanceTypes", "UnauthorizedOperation")
}

// Prices falls back to the catalog it is given: a local row's price, for a type only it has.
func TestPricesFallBackToGivenCatalog(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.Deny("GetProducts", true)
	local := spec.BuiltinCatalog().WithOverrides([]spec.InstanceType{
		{Name: "c5.large", GPUs: 1, GPUModel: "none", PricePerHour: 0.5, Source: "test"}})
	ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{"c5.large"}, cloud.OnDemand, local)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, ps, row{"c5.large", cloud.OnDemand, "", 0.5, rbec2.SourceCatalog})
}
