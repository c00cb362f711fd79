package spec

// InstanceType is one entry of the built-in catalog.
type InstanceType struct {
	Name     string
	GPUs     int
	GPUModel string
	// PricePerHour is the on-demand Linux price in us-east-1, in dollars.
	PricePerHour float64
	// SpotPricePerHour is a spot price seen by a source, 0 when no source gives one.
	SpotPricePerHour float64
	// NetworkGbps is the instance's network bandwidth ("up to" figures taken at their cap).
	NetworkGbps float64
	// Source says where the figures come from.
	Source string
}

const (
	srcSTASH  = "STASH (seeds/001) Table 1: AWS GPU instance types with prices (N. Virginia)"
	srcSrifty = "Srifty (seeds/000) Table 1 (GPU, network) and Table 3 (spot rate at time of writing)"
	srcAWS    = "AWS on-demand price list, us-east-1 Linux (no seed gives an on-demand price for this type)"
)

// Catalog returns the built-in instance types, sorted by name. The STASH names are kept as the
// paper prints them: its "p3.24xlarge" is sold by AWS as p3dn.24xlarge.
func Catalog() []InstanceType {
	return []InstanceType{
		{Name: "g3.8xlarge", GPUs: 2, GPUModel: "M60", PricePerHour: 2.28, SpotPricePerHour: 0.69, NetworkGbps: 10,
			Source: srcSrifty + "; on-demand price: " + srcAWS},
		{Name: "g4dn.2xlarge", GPUs: 1, GPUModel: "T4", PricePerHour: 0.752, SpotPricePerHour: 0.72, NetworkGbps: 25,
			Source: srcSrifty + " (one spot rate given for g4dn.2xl/8xl); on-demand price: " + srcAWS},
		{Name: "g4dn.8xlarge", GPUs: 1, GPUModel: "T4", PricePerHour: 2.176, SpotPricePerHour: 0.72, NetworkGbps: 50,
			Source: srcSrifty + " (one spot rate given for g4dn.2xl/8xl); on-demand price: " + srcAWS},
		{Name: "p2.16xlarge", GPUs: 16, GPUModel: "K80", PricePerHour: 14.40, NetworkGbps: 25, Source: srcSTASH},
		{Name: "p2.8xlarge", GPUs: 8, GPUModel: "K80", PricePerHour: 7.20, NetworkGbps: 10, Source: srcSTASH},
		{Name: "p2.xlarge", GPUs: 1, GPUModel: "K80", PricePerHour: 0.90, NetworkGbps: 10, Source: srcSTASH + " (network < 10 Gbps)"},
		{Name: "p3.16xlarge", GPUs: 8, GPUModel: "V100", PricePerHour: 24.48, NetworkGbps: 25, Source: srcSTASH},
		{Name: "p3.24xlarge", GPUs: 8, GPUModel: "V100", PricePerHour: 31.218, NetworkGbps: 100, Source: srcSTASH},
		{Name: "p3.2xlarge", GPUs: 1, GPUModel: "V100", PricePerHour: 3.06, NetworkGbps: 10, Source: srcSTASH + " (network up to 10 Gbps)"},
		{Name: "p3.8xlarge", GPUs: 4, GPUModel: "V100", PricePerHour: 12.24, SpotPricePerHour: 3.68, NetworkGbps: 10,
			Source: srcSTASH + "; spot rate: Srifty (seeds/000) Table 3"},
		{Name: "p4d.24xlarge", GPUs: 8, GPUModel: "A100", PricePerHour: 32.7726, NetworkGbps: 400, Source: srcSTASH},
	}
}

// LookupInstance finds an instance type in the catalog.
func LookupInstance(name string) (InstanceType, bool) {
	for _, it := range Catalog() {
		if it.Name == name {
			return it, true
		}
	}
	return InstanceType{}, false
}

func catalogNames() []string {
	var names []string
	for _, it := range Catalog() {
		names = append(names, it.Name)
	}
	return names
}
