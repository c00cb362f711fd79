package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// `catalog refresh` reads the fake's GPU types and prices through the SDK into a 0600 file
// whose rows are what the fake serves; `catalog` then lists them as local.
func TestCatalogRefresh(t *testing.T) {
	_, env := startEC2Sim(t)
	file := filepath.Join(t.TempDir(), "sub", "catalog.json")
	out, errOut, code := rbEnv(t, binary, env, "catalog", "refresh", "--region", "us-east-1", "--catalog", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "wrote "+file) {
		t.Errorf("output %q", out)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", st, err)
	}
	f, err := spec.ReadCatalogFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]spec.InstanceType{}
	for _, it := range f.InstanceTypes {
		got[it.Name] = it
	}
	n := 0
	for _, ft := range ec2sim.DefaultInstanceTypes() {
		if ft.GPUs == 0 {
			continue
		}
		n++
		it := got[ft.Name]
		if it.GPUs != ft.GPUs || it.GPUModel != ft.GPUModel || it.GPUMemoryGiB != float64(ft.GPUMemoryMiB)/1024 || it.PricePerHour != ft.OnDemandPrice ||
			!strings.HasPrefix(it.Source, "DescribeInstanceTypes + Pricing API, us-east-1, fetched ") {
			t.Errorf("%s: %+v, the fake serves %+v", ft.Name, it, ft)
		}
	}
	if len(f.InstanceTypes) != n {
		t.Errorf("%d rows, want the fake's %d GPU types", len(f.InstanceTypes), n)
	}
	out, errOut, code = rb(t, "catalog", "--catalog", file, "-o", "json")
	var rows []struct {
		Name, Origin string
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != len(spec.Catalog()) {
		t.Fatalf("catalog -o json: exit %d, %d rows: %s", code, len(rows), errOut)
	}
	for _, r := range rows {
		if r.Origin != "local" {
			t.Errorf("%s from %s, want local", r.Name, r.Origin)
		}
	}
}

// A type only a local catalog has validates, plans and is priced with that catalog; without
// it validate names the field and line; a malformed catalog file is named.
func TestLocalCatalogCommands(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "catalog.json")
	f := &spec.CatalogFile{Version: spec.CatalogFileVersion, Region: "us-east-1", InstanceTypes: []spec.InstanceType{
		{Name: "g7e.2xlarge", GPUs: 1, GPUModel: "RTX PRO 6000", PricePerHour: 3.36312, NetworkGbps: 50, Source: "test"}}}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "g7e.yaml")
	src := "name: g7e\ndeadline: 1h\nobjective: {metric: m}\nalgorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"cluster:\n  instance_type: g7e.2xlarge\n  max_nodes: 4\nprofile: {iter_latency: {1: {mean: 1}}}\nplanner: {samples: 8}\n"
	if err := os.WriteFile(specFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := rb(t, "validate", specFile, "--catalog", local); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Errorf("validate with the local catalog: exit %d: %s%s", code, out, errOut)
	}
	if out, errOut, code := rb(t, "plan", specFile, "--catalog", local, "-o", "json"); code != 0 || !strings.Contains(out, `"price_per_hour": 3.36312`) {
		t.Errorf("plan with the local catalog: exit %d: %s%s", code, out, errOut)
	}
	_, errOut, code := rb(t, "validate", specFile, "--root", dir+"/none")
	if code != 2 || !strings.Contains(errOut, specFile+`:6: cluster.instance_type: unknown instance type "g7e.2xlarge"`) {
		t.Errorf("validate without it: exit %d: %s", code, errOut)
	}
	// ROOT/catalog.json is the default.
	if _, errOut, code := rb(t, "validate", specFile, "--root", dir); code != 0 {
		t.Errorf("validate with ROOT/catalog.json: exit %d: %s", code, errOut)
	}
	// schema offers editors the local type beside the built-in ones, and without it only those.
	for _, c := range []struct {
		root string
		want bool
	}{{dir, true}, {dir + "/none", false}} {
		out, errOut, code := rb(t, "schema", "--root", c.root)
		if code != 0 || strings.Contains(out, `"g7e.2xlarge"`) != c.want || !strings.Contains(out, `"p5.48xlarge"`) {
			t.Errorf("schema --root %s: exit %d, lists g7e.2xlarge %v (want %v): %s", c.root, code, !c.want, c.want, errOut)
		}
	}
	// A run keeps the catalog it was started with: its status reads the spec with it once the
	// file is gone.
	state := filepath.Join(dir, "run")
	if _, errOut, code := rb(t, "run", specFile, "--catalog", local, "--backend", "virtual", "--state", state); code != 0 {
		t.Fatalf("run with the local catalog: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(state, rundir.CatalogCopy)); err != nil {
		t.Errorf("the run kept no copy of its catalog: %v", err)
	}
	moved := local + ".moved"
	if err := os.Rename(local, moved); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := rb(t, "status", state, "-o", "json"); code != 0 || !strings.Contains(out, "g7e") {
		t.Errorf("status of the run without the catalog file: exit %d: %s%s", code, out, errOut)
	}
	if err := os.Rename(moved, local); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1, "instance_types": [{"name": "g7e.2xlarge"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "validate", specFile, "--catalog", bad); code != 2 || !strings.Contains(errOut, "catalog file "+bad) {
		t.Errorf("malformed catalog: exit %d: %s", code, errOut)
	}
	// prices: AWS has no price for it, the local catalog has.
	_, env := startEC2Sim(t)
	out, errOut, code := rbEnv(t, binary, env, "prices", "g7e.2xlarge", "--market", "on-demand", "--catalog", local, "-o", "json")
	if code != 0 || !strings.Contains(out, `"per_hour": 3.36312`) || !strings.Contains(out, `"source": "catalog (offline)"`) {
		t.Errorf("prices with the local catalog: exit %d: %s%s", code, out, errOut)
	}
}
