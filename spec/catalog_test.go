package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The built-in catalog is sorted, each name once, every row complete and sourced; it covers the
// GPU families AWS sells today, and the rows the paper reproductions use keep the seeds' figures.
func TestCatalogRows(t *testing.T) {
	cat := Catalog()
	if !slices.IsSortedFunc(cat, func(a, b InstanceType) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("not sorted by name: %v", BuiltinCatalog().Names())
	}
	seen := map[string]bool{}
	for _, it := range cat {
		if seen[it.Name] {
			t.Errorf("%s listed twice", it.Name)
		}
		seen[it.Name] = true
		if err := CheckInstanceType(it); err != nil {
			t.Error(err)
		}
		if it.GPUMemoryGiB <= 0 || it.VCPUs <= 0 || it.MemoryGiB <= 0 || it.NetworkGbps <= 0 {
			t.Errorf("%s lacks a figure: %+v", it.Name, it)
		}
	}
	for _, name := range []string{"g4dn.xlarge", "g4dn.12xlarge", "g5.xlarge", "g5.48xlarge", "g6.xlarge", "g6.48xlarge",
		"g6e.xlarge", "g6e.48xlarge", "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge",
		"p5.48xlarge", "p5en.48xlarge"} {
		if !seen[name] {
			t.Errorf("the catalog lacks %s", name)
		}
	}
	for name, price := range map[string]float64{"p3.8xlarge": 12.24, "p3.16xlarge": 24.48, "p2.xlarge": 0.90} {
		if it, _ := LookupInstance(name); it.PricePerHour != price {
			t.Errorf("%s costs %v, want the seeds' %v", name, it.PricePerHour, price)
		}
	}
	if it, _ := LookupInstance("g6e.12xlarge"); it.GPUs != 4 || it.GPUModel != "L40S" || it.GPUMemoryGiB != 48 || it.PricePerHour != 10.49264 {
		t.Errorf("g6e.12xlarge %+v", it)
	}
}

// Every catalog type validates, as the cluster's type and as a candidate, and fills the
// cluster's fields from its row.
func TestEveryCatalogTypeValidates(t *testing.T) {
	for _, it := range Catalog() {
		exp, err := Parse("a.yaml", []byte(withField("cluster: {instance_type: "+it.Name+"}")), nil)
		if err != nil {
			t.Errorf("%s: %v", it.Name, err)
			continue
		}
		c := exp.Cluster
		if c.GPUsPerNode != it.GPUs || c.PricePerHour != it.PricePerHour || c.GPUModel != it.GPUModel || c.NetworkGbps != it.NetworkGbps {
			t.Errorf("%s filled %+v", it.Name, c)
		}
		if _, err := Parse("a.yaml", []byte(withField("cluster: {instance_types: [{instance_type: "+it.Name+"}]}")), nil); err != nil {
			t.Errorf("%s as a candidate: %v", it.Name, err)
		}
	}
}

// A type only a local catalog has validates when that catalog is given, and is an unknown type
// at its field and line when it is not; a local row replaces the built-in one of its name.
func TestLocalCatalog(t *testing.T) {
	local := []InstanceType{
		{Name: "g7e.2xlarge", GPUs: 1, GPUModel: "RTX PRO 6000", GPUMemoryGiB: 96, PricePerHour: 3.36312, NetworkGbps: 50, Source: "test"},
		{Name: "g5.xlarge", GPUs: 1, GPUModel: "A10G", PricePerHour: 1.5, NetworkGbps: 10, Source: "test"},
	}
	cat := BuiltinCatalog().WithOverrides(local)
	src := withField("cluster:\n  instance_type: g7e.2xlarge\n")
	exp, err := Parse("a.yaml", []byte(src), nil, WithCatalog(cat))
	if err != nil {
		t.Fatal(err)
	}
	if exp.Cluster.GPUModel != "RTX PRO 6000" || exp.Cluster.PricePerHour != 3.36312 {
		t.Errorf("cluster %+v", exp.Cluster)
	}
	_, err = Parse("a.yaml", []byte(src), nil)
	probs := problems(t, err)
	line := strings.Count(src[:strings.Index(src, "instance_type")], "\n") + 1
	if len(probs) != 1 || probs[0].Path != "cluster.instance_type" || probs[0].Line != line ||
		!strings.Contains(probs[0].Msg, `unknown instance type "g7e.2xlarge"`) {
		t.Errorf("without the local catalog: want one problem at cluster.instance_type line %d, got\n%v", line, err)
	}
	// A candidate too; the hint names the family's types when the catalog has some.
	_, err = Parse("a.yaml", []byte(withField("cluster: {instance_types: [{instance_type: g5.64xlarge}]}")), nil, WithCatalog(cat))
	if probs := problems(t, err); len(probs) != 1 || probs[0].Path != "cluster.instance_types[0].instance_type" ||
		!strings.Contains(probs[0].Msg, "the catalog's g5 types: ") || !strings.Contains(probs[0].Msg, "g5.xlarge") {
		t.Errorf("unknown candidate: %v", err)
	}
	exp, err = Parse("a.yaml", []byte(withField("cluster: {instance_type: g5.xlarge}")), nil, WithCatalog(cat))
	if err != nil || exp.Cluster.PricePerHour != 1.5 {
		t.Errorf("the local g5.xlarge should replace the built-in one: %v %+v", err, exp.Cluster)
	}
	if it, _ := LookupInstance("g5.xlarge"); it.PricePerHour != 1.006 {
		t.Errorf("WithOverrides changed the built-in catalog: %+v", it)
	}
	if len(cat) != len(Catalog())+1 || !slices.IsSortedFunc(cat, func(a, b InstanceType) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("merged catalog: %v", cat.Names())
	}
}

func TestCatalogFileRoundTrip(t *testing.T) {
	at := time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC)
	f := &CatalogFile{Version: CatalogFileVersion, Region: "us-west-2", FetchedAt: at, InstanceTypes: []InstanceType{
		{Name: "g6.xlarge", GPUs: 1, GPUModel: "L4", GPUMemoryGiB: 22, VCPUs: 4, MemoryGiB: 16, PricePerHour: 0.8048, NetworkGbps: 10, Source: "s"},
		{Name: "g5.xlarge", GPUs: 1, GPUModel: "A10G", PricePerHour: 1.006, Source: "s"},
	}}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCatalogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Region != "us-west-2" || !got.FetchedAt.Equal(at) || len(got.InstanceTypes) != 2 || got.InstanceTypes[0].Name != "g5.xlarge" ||
		got.InstanceTypes[1] != f.InstanceTypes[0] {
		t.Errorf("read back %+v", got)
	}
}

// A malformed or oversized catalog file is an error that names the file and what is wrong.
func TestCatalogFileErrors(t *testing.T) {
	row := `{"name": "g5.xlarge", "gpus": 1, "gpu_model": "A10G", "price_per_hour": 1.006, "source": "s"}`
	file := func(rows ...string) string {
		return `{"version": 1, "region": "us-east-1", "fetched_at": "2026-08-06T00:00:00Z", "instance_types": [` + strings.Join(rows, ",") + `]}`
	}
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", "gpus: 1", "not a catalog (JSON)"},
		{"truncated", file(row)[:40], "not a catalog (JSON)"},
		{"unknown field", strings.Replace(file(row), `"gpus"`, `"gpu_count"`, 1), `unknown field "gpu_count"`},
		{"version", strings.Replace(file(row), `"version": 1`, `"version": 7`, 1), "version 7 is not 1"},
		{"twice", file(row, row), `"g5.xlarge" is listed twice`},
		{"no price", file(strings.Replace(row, "1.006", "0", 1)), "price_per_hour 0 is out of range"},
		{"no gpus", file(strings.Replace(row, `"gpus": 1`, `"gpus": 0`, 1)), "gpus 0 is out of range"},
		{"bad name", file(strings.Replace(row, "g5.xlarge", "G5 XL", 1)), "not an instance type's"},
		{"no source", file(strings.Replace(row, `"source": "s"`, `"source": ""`, 1)), "source is required"},
		{"trailing", file(row) + "{}", "text after"},
	} {
		_, err := ParseCatalogFile("local.json", []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), "catalog file local.json") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming local.json and %q", tc.name, err, tc.want)
		}
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, make([]byte, MaxCatalogFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCatalogFile(big); err == nil || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), "above the limit") {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := ReadCatalogFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// Every built-in row is an EC2 type by AWS's name and priced on one date: p3.24xlarge (STASH's
// name) is not an EC2 type, p3dn.24xlarge is; p4d.24xlarge (A100 40 GiB) cost more than
// p4de.24xlarge (A100 80 GiB) because its row kept STASH's price from before AWS's June 2025 cut
// and p4de's was AWS's after it. Both were so on main. A spec naming p3.24xlarge is told
// AWS's name.
func TestCatalogIsEC2sOnOneDate(t *testing.T) {
	if _, ok := LookupInstance("p3.24xlarge"); ok {
		t.Error("p3.24xlarge is not an EC2 type")
	}
	want := map[string]InstanceType{
		"p3dn.24xlarge": {GPUs: 8, GPUModel: "V100", GPUMemoryGiB: 32, VCPUs: 96, MemoryGiB: 768, NetworkGbps: 100, PricePerHour: 31.212},
		"p4d.24xlarge":  {GPUs: 8, GPUModel: "A100", GPUMemoryGiB: 40, VCPUs: 96, MemoryGiB: 1152, NetworkGbps: 400, PricePerHour: 21.957642},
		"p4de.24xlarge": {GPUs: 8, GPUModel: "A100", GPUMemoryGiB: 80, VCPUs: 96, MemoryGiB: 1152, NetworkGbps: 400, PricePerHour: 27.44705},
	}
	for name, w := range want {
		it, ok := LookupInstance(name)
		w.Name, w.Source = name, it.Source
		if !ok || it != w {
			t.Errorf("%s: %+v, want %+v", name, it, w)
		}
	}
	// The same GPUs, more memory on each: never cheaper.
	for _, a := range Catalog() {
		for _, b := range Catalog() {
			if a.GPUModel == b.GPUModel && a.GPUs == b.GPUs && a.VCPUs == b.VCPUs && a.GPUMemoryGiB < b.GPUMemoryGiB && a.PricePerHour > b.PricePerHour {
				t.Errorf("%s (%g GiB a GPU) costs $%v/h, more than %s (%g GiB) at $%v/h", a.Name, a.GPUMemoryGiB, a.PricePerHour, b.Name, b.GPUMemoryGiB, b.PricePerHour)
			}
		}
	}
	_, err := Parse("a.yaml", []byte(withField("cluster: {instance_type: p3.24xlarge}")), nil)
	if probs := problems(t, err); len(probs) != 1 || probs[0].Path != "cluster.instance_type" ||
		!strings.Contains(probs[0].Msg, "AWS sells that machine as p3dn.24xlarge") {
		t.Errorf("p3.24xlarge: %v", probs)
	}
}
