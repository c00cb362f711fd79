package spec

import (
	"fmt"
	"slices"
	"strings"
)

// InstanceType is one entry of an instance catalog: the built-in one (Catalog) or one read from a
// local catalog file (ReadCatalogFile).
type InstanceType struct {
	Name     string `json:"name"`
	GPUs     int    `json:"gpus"`
	GPUModel string `json:"gpu_model"`
	// GPUMemoryGiB is the memory of one GPU, in GiB; 0 when the source gives none.
	GPUMemoryGiB float64 `json:"gpu_memory_gib,omitempty"`
	// VCPUs and MemoryGiB are the instance's own; 0 when the source gives none.
	VCPUs     int     `json:"vcpus,omitempty"`
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	// PricePerHour is the on-demand Linux price, in dollars: us-east-1's for the built-in
	// catalog, the refreshed region's for a local catalog.
	PricePerHour float64 `json:"price_per_hour"`
	// SpotPricePerHour is a spot price seen by a source, 0 when no source gives one.
	SpotPricePerHour float64 `json:"spot_price_per_hour,omitempty"`
	// NetworkGbps is the instance's network bandwidth ("up to" figures taken at their cap); 0
	// when the source gives none.
	NetworkGbps float64 `json:"network_gbps,omitempty"`
	// Source says where the figures come from.
	Source string `json:"source"`
}

const (
	srcSTASH  = "STASH (seeds/001) Table 1: AWS GPU instance types with prices (N. Virginia)"
	srcSrifty = "Srifty (seeds/000) Table 1 (GPU, network) and Table 3 (spot rate at time of writing)"
	srcAWS    = "AWS on-demand price list, us-east-1 Linux (no seed gives an on-demand price for this type)"
	// srcAWSSpecs gives GPUs, GPU model and memory, vCPUs, memory and network ("up to" at its cap).
	srcAWSSpecs = "AWS EC2 instance types guide, accelerated computing specifications (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html)"
	// srcAWSPrice: these prices were not read from AWS here but from published copies of the Price
	// List API's output, dated 2025-03 to 2026-08, which agree on them; `rubberband catalog
	// refresh` reads AWS's own.
	srcAWSPrice = "AWS Price List API, us-east-1 Linux shared-tenancy on-demand, as of 2026-08 (after AWS's June 2025 P4/P5 price cut)"
)

// awsRow is a row whose figures are all AWS's: shape from its instance types guide, price from its
// price list.
func awsRow(name string, gpus int, model string, gpuMemGiB float64, vcpus int, memGiB, netGbps, price float64) InstanceType {
	return InstanceType{Name: name, GPUs: gpus, GPUModel: model, GPUMemoryGiB: gpuMemGiB, VCPUs: vcpus, MemoryGiB: memGiB,
		NetworkGbps: netGbps, PricePerHour: price, Source: srcAWSSpecs + "; price: " + srcAWSPrice}
}

// withNote adds to a row's source what a seed said of it.
func withNote(it InstanceType, note string) InstanceType {
	it.Source += "; " + note
	return it
}

// Catalog returns the built-in instance types, sorted by name, each an EC2 type by AWS's name:
// STASH's "p3.24xlarge" is AWS's p3dn.24xlarge (misnamed). The rows of the seeds' types the
// paper reproductions use keep the seeds' figures, which are still AWS's prices; where AWS's
// price has changed since (p4d.24xlarge, cut in June 2025) or the seed's differs from it
// (p3dn.24xlarge), the row is AWS's and its source says what the seed gave. p5e.48xlarge is left
// out: AWS sells it through Capacity Blocks only, with no on-demand price.
func Catalog() []InstanceType {
	return []InstanceType{
		{Name: "g3.8xlarge", GPUs: 2, GPUModel: "M60", GPUMemoryGiB: 8, VCPUs: 32, MemoryGiB: 244, PricePerHour: 2.28, SpotPricePerHour: 0.69,
			NetworkGbps: 10, Source: srcSrifty + "; on-demand price: " + srcAWS + "; shape: " + srcAWSSpecs},
		awsRow("g4dn.12xlarge", 4, "T4", 16, 48, 192, 50, 3.912),
		awsRow("g4dn.16xlarge", 1, "T4", 16, 64, 256, 50, 4.352),
		{Name: "g4dn.2xlarge", GPUs: 1, GPUModel: "T4", GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 32, PricePerHour: 0.752, SpotPricePerHour: 0.72,
			NetworkGbps: 25, Source: srcSrifty + " (one spot rate given for g4dn.2xl/8xl); on-demand price: " + srcAWS + "; shape: " + srcAWSSpecs},
		awsRow("g4dn.4xlarge", 1, "T4", 16, 16, 64, 25, 1.204),
		{Name: "g4dn.8xlarge", GPUs: 1, GPUModel: "T4", GPUMemoryGiB: 16, VCPUs: 32, MemoryGiB: 128, PricePerHour: 2.176, SpotPricePerHour: 0.72,
			NetworkGbps: 50, Source: srcSrifty + " (one spot rate given for g4dn.2xl/8xl); on-demand price: " + srcAWS + "; shape: " + srcAWSSpecs},
		awsRow("g4dn.metal", 8, "T4", 16, 96, 384, 100, 7.824),
		awsRow("g4dn.xlarge", 1, "T4", 16, 4, 16, 25, 0.526),
		awsRow("g5.12xlarge", 4, "A10G", 24, 48, 192, 40, 5.672),
		awsRow("g5.16xlarge", 1, "A10G", 24, 64, 256, 25, 4.096),
		awsRow("g5.24xlarge", 4, "A10G", 24, 96, 384, 50, 8.144),
		awsRow("g5.2xlarge", 1, "A10G", 24, 8, 32, 10, 1.212),
		awsRow("g5.48xlarge", 8, "A10G", 24, 192, 768, 100, 16.288),
		awsRow("g5.4xlarge", 1, "A10G", 24, 16, 64, 25, 1.624),
		awsRow("g5.8xlarge", 1, "A10G", 24, 32, 128, 25, 2.448),
		awsRow("g5.xlarge", 1, "A10G", 24, 4, 16, 10, 1.006),
		awsRow("g6.12xlarge", 4, "L4", 24, 48, 192, 40, 4.6016),
		awsRow("g6.16xlarge", 1, "L4", 24, 64, 256, 25, 3.3968),
		awsRow("g6.24xlarge", 4, "L4", 24, 96, 384, 50, 6.6752),
		awsRow("g6.2xlarge", 1, "L4", 24, 8, 32, 10, 0.9776),
		awsRow("g6.48xlarge", 8, "L4", 24, 192, 768, 100, 13.3504),
		awsRow("g6.4xlarge", 1, "L4", 24, 16, 64, 25, 1.3232),
		awsRow("g6.8xlarge", 1, "L4", 24, 32, 128, 25, 2.0144),
		awsRow("g6.xlarge", 1, "L4", 24, 4, 16, 10, 0.8048),
		awsRow("g6e.12xlarge", 4, "L40S", 48, 48, 384, 100, 10.49264),
		awsRow("g6e.16xlarge", 1, "L40S", 48, 64, 512, 35, 7.57719),
		awsRow("g6e.24xlarge", 4, "L40S", 48, 96, 768, 200, 15.06559),
		awsRow("g6e.2xlarge", 1, "L40S", 48, 8, 64, 20, 2.24208),
		awsRow("g6e.48xlarge", 8, "L40S", 48, 192, 1536, 400, 30.13118),
		awsRow("g6e.4xlarge", 1, "L40S", 48, 16, 128, 20, 3.00424),
		awsRow("g6e.8xlarge", 1, "L40S", 48, 32, 256, 25, 4.52856),
		awsRow("g6e.xlarge", 1, "L40S", 48, 4, 32, 20, 1.861),
		{Name: "p2.16xlarge", GPUs: 16, GPUModel: "K80", GPUMemoryGiB: 12, VCPUs: 64, MemoryGiB: 732, PricePerHour: 14.40, NetworkGbps: 25,
			Source: srcSTASH + "; shape: " + srcAWSSpecs},
		{Name: "p2.8xlarge", GPUs: 8, GPUModel: "K80", GPUMemoryGiB: 12, VCPUs: 32, MemoryGiB: 488, PricePerHour: 7.20, NetworkGbps: 10,
			Source: srcSTASH + "; shape: " + srcAWSSpecs},
		{Name: "p2.xlarge", GPUs: 1, GPUModel: "K80", GPUMemoryGiB: 12, VCPUs: 4, MemoryGiB: 61, PricePerHour: 0.90, NetworkGbps: 10,
			Source: srcSTASH + " (network < 10 Gbps); shape: " + srcAWSSpecs},
		{Name: "p3.16xlarge", GPUs: 8, GPUModel: "V100", GPUMemoryGiB: 16, VCPUs: 64, MemoryGiB: 488, PricePerHour: 24.48, NetworkGbps: 25,
			Source: srcSTASH + "; shape: " + srcAWSSpecs},
		{Name: "p3.2xlarge", GPUs: 1, GPUModel: "V100", GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 61, PricePerHour: 3.06, NetworkGbps: 10,
			Source: srcSTASH + " (network up to 10 Gbps); shape: " + srcAWSSpecs},
		{Name: "p3.8xlarge", GPUs: 4, GPUModel: "V100", GPUMemoryGiB: 16, VCPUs: 32, MemoryGiB: 244, PricePerHour: 12.24, SpotPricePerHour: 3.68,
			NetworkGbps: 10, Source: srcSTASH + "; spot rate: Srifty (seeds/000) Table 3; shape: " + srcAWSSpecs},
		withNote(awsRow("p3dn.24xlarge", 8, "V100", 32, 96, 768, 100, 31.212),
			"STASH (seeds/001) Table 1 names it p3.24xlarge, which is not an EC2 type, at 31.218"),
		withNote(awsRow("p4d.24xlarge", 8, "A100", 40, 96, 1152, 400, 21.957642),
			"STASH (seeds/001) Table 1 gives 32.7726, AWS's price before its June 2025 cut (when p4de.24xlarge's was 40.96576)"),
		awsRow("p4de.24xlarge", 8, "A100", 80, 96, 1152, 400, 27.44705),
		awsRow("p5.48xlarge", 8, "H100", 80, 192, 2048, 3200, 55.04),
		awsRow("p5.4xlarge", 1, "H100", 80, 16, 256, 100, 6.88),
		awsRow("p5en.48xlarge", 8, "H200", 141, 192, 2048, 3200, 63.296),
	}
}

// LookupInstance finds an instance type in the built-in catalog.
func LookupInstance(name string) (InstanceType, bool) {
	return BuiltinCatalog().Lookup(name)
}

// InstanceCatalog is the instance types a spec may name, sorted by name, each name once.
type InstanceCatalog []InstanceType

// BuiltinCatalog is Catalog as an InstanceCatalog: what parsing uses unless given another.
func BuiltinCatalog() InstanceCatalog { return Catalog() }

// WithOverrides is the catalog with rows added: one of the same name as a row of c replaces it
// (a local catalog's price and figures win over the built-in ones), the others join it.
func (c InstanceCatalog) WithOverrides(rows []InstanceType) InstanceCatalog {
	out := slices.Clone(c)
	for _, r := range rows {
		if i := slices.IndexFunc(out, func(it InstanceType) bool { return it.Name == r.Name }); i >= 0 {
			out[i] = r
		} else {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup finds an instance type by name.
func (c InstanceCatalog) Lookup(name string) (InstanceType, bool) {
	for _, it := range c {
		if it.Name == name {
			return it, true
		}
	}
	return InstanceType{}, false
}

// Names are the catalog's type names, in order.
func (c InstanceCatalog) Names() []string {
	names := make([]string, 0, len(c))
	for _, it := range c {
		names = append(names, it.Name)
	}
	return names
}

// misnamed is AWS's name of a type that papers and older catalogs print under a name EC2 does
// not know, "" for any other name.
func misnamed(name string) string {
	switch name {
	case "p3.24xlarge": // STASH's Table 1 (seeds/001), and this catalog until it was renamed
		return "p3dn.24xlarge"
	}
	return ""
}

// unknownHint says what the catalog has instead of name, for a problem: the types of its family
// when there are any (g5.64xlarge: the g5 sizes), else how many there are and how to list them,
// since the whole catalog is too long for one line.
func (c InstanceCatalog) unknownHint(name string) string {
	if aws := misnamed(name); aws != "" {
		if _, ok := c.Lookup(aws); ok {
			return fmt.Sprintf("%s is not an EC2 type: AWS sells that machine as %s", name, aws)
		}
	}
	family, _, _ := strings.Cut(name, ".")
	var kin []string
	for _, it := range c {
		if f, _, _ := strings.Cut(it.Name, "."); f == family {
			kin = append(kin, it.Name)
		}
	}
	if len(kin) > 0 {
		return fmt.Sprintf("the catalog's %s types: %s", family, strings.Join(kin, ", "))
	}
	return fmt.Sprintf("the catalog has %d types; `rubberband catalog` lists them", len(c))
}
