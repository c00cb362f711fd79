package spec

import (
	"fmt"
	"slices"
)

// InstanceChoice is one candidate instance type of cluster.instance_types: a planner may give any
// stage nodes of it, in any of cluster.markets. Fields left out come from the catalog entry of
// InstanceType, then from the cluster (latencies, the spot block's discount) and the spec's
// profile; after Parse every field holds its value.
type InstanceChoice struct {
	InstanceType     string  `yaml:"instance_type"`
	GPUModel         string  `yaml:"gpu_model"`
	GPUsPerNode      int     `yaml:"gpus_per_node"`
	PricePerHour     float64 `yaml:"price_per_hour"`
	SpotPricePerHour float64 `yaml:"spot_price_per_hour"`
	NetworkGbps      float64 `yaml:"network_gbps"`
	ScaleLatency     Dist    `yaml:"scale_latency"`
	InitLatency      Dist    `yaml:"init_latency"`
	// Profile is the model's scaling profile on this type (`rubberband profile --instance-type`
	// writes one); default: the spec's profile.
	Profile Profile `yaml:"profile"`
}

// HourlyPrice is what one node of the type costs per hour in a market.
func (ic InstanceChoice) HourlyPrice(market string) float64 {
	if market == MarketSpot {
		return ic.SpotPricePerHour
	}
	return ic.PricePerHour
}

// Offers lists what a planner may rent: every candidate type (the cluster's own type alone when
// no instance_types are given) in every allowed market, the cluster's own type and market first.
func (e *Experiment) Offers() []Offer {
	c := e.Cluster
	types := c.InstanceTypes
	if len(types) == 0 {
		own, _ := e.Candidate("")
		types = []InstanceChoice{own}
	}
	markets := c.Markets
	if len(markets) == 0 {
		markets = []string{c.Market}
	}
	var out []Offer
	for _, it := range types {
		for _, m := range markets {
			o := Offer{Type: it, Market: m}
			if it.InstanceType == c.InstanceType && m == c.Market {
				out = append([]Offer{o}, out...)
			} else {
				out = append(out, o)
			}
		}
	}
	return out
}

// Offer is one instance type in one market.
type Offer struct {
	Type   InstanceChoice
	Market string
}

// ownType is the cluster's own instance type as a candidate (with the spec's profile unset: the
// caller has it).
func (c Cluster) ownType() InstanceChoice {
	return InstanceChoice{InstanceType: c.InstanceType, GPUModel: c.GPUModel, GPUsPerNode: c.GPUsPerNode, PricePerHour: c.PricePerHour,
		SpotPricePerHour: c.SpotPricePerHour, NetworkGbps: c.NetworkGbps, ScaleLatency: c.ScaleLatency, InitLatency: c.InitLatency}
}

// Candidate returns the candidate instance type named name, or the cluster's own type (with the
// spec's profile) when no instance_types are given and name is its type or empty.
func (e *Experiment) Candidate(name string) (InstanceChoice, bool) {
	c := e.Cluster
	if len(c.InstanceTypes) == 0 {
		if name != "" && name != c.InstanceType {
			return InstanceChoice{}, false
		}
		own := c.ownType()
		own.Profile = e.Profile
		return own, true
	}
	if name == "" {
		name = c.InstanceType
	}
	for _, it := range c.InstanceTypes {
		if it.InstanceType == name {
			return it, true
		}
	}
	return InstanceChoice{}, false
}

// ProfileFiles lists the profile files the spec read (its own and each instance type's), each
// once, in the order of the fields that name them.
func (e *Experiment) ProfileFiles() []string {
	var files []string
	for _, at := range sortedKeys(e.profileFiles) {
		if f := e.profileFiles[at]; !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}

// ProfileFile is the file the spec's own profile was read from (profile: {file: F}), as the spec
// names it; "" for an inline profile or none.
func (e *Experiment) ProfileFile() string { return e.profileFiles["profile"] }

func candidatePath(i int) string { return fmt.Sprintf("cluster.instance_types[%d]", i) }

// typeFields are the cluster fields that describe one instance type: with instance_types they
// belong to each candidate.
var typeFields = []string{"gpus_per_node", "price_per_hour", "spot_price_per_hour", "network_gbps", "gpu_model", "spot.price_per_hour"}

// candidateDefaults fills each candidate's fields from the catalog, the cluster and the spec's
// profile; it runs after the cluster's own defaults. It also makes the cluster's type fields
// those of its default type (cluster.instance_type, the first candidate unless given), so that
// what reads the cluster alone sees that type.
func (e *Experiment) candidateDefaults(cat InstanceCatalog) Problems {
	c := &e.Cluster
	if len(c.InstanceTypes) == 0 {
		return nil
	}
	var probs Problems
	for _, f := range typeFields {
		if e.Has("cluster." + f) {
			probs = append(probs, Problem{File: e.File, Line: e.Line("cluster." + f), Path: "cluster." + f,
				Msg: "describes one instance type: with instance_types, set it on the candidate"})
		}
	}
	for i := range c.InstanceTypes {
		it, at := &c.InstanceTypes[i], candidatePath(i)
		entry, ok := cat.Lookup(it.InstanceType)
		if !ok && it.InstanceType != "" && !e.unknown(at+".instance_type") && !e.Has(at+".gpus_per_node") {
			probs = append(probs, Problem{File: e.File, Line: e.Line(at + ".instance_type"), Path: at + ".instance_type",
				Msg: fmt.Sprintf("unknown instance type %q (%s; or set gpus_per_node and price_per_hour)", it.InstanceType, cat.unknownHint(it.InstanceType))})
		}
		fill := func(field string, set func()) {
			switch {
			case e.Has(at + "." + field):
			case ok:
				set()
			default:
				e.markFailed(at + "." + field)
			}
		}
		fill("gpus_per_node", func() { it.GPUsPerNode = entry.GPUs })
		fill("price_per_hour", func() { it.PricePerHour = entry.PricePerHour })
		fill("gpu_model", func() { it.GPUModel = entry.GPUModel })
		fill("network_gbps", func() { it.NetworkGbps = entry.NetworkGbps })
		switch {
		case e.Has(at + ".spot_price_per_hour"):
		case e.Has(pathDiscount):
			it.SpotPricePerHour = it.PricePerHour * (1 - c.Spot.Discount)
		case ok:
			it.SpotPricePerHour = entry.SpotPricePerHour
		default: // unknown, like a field that failed to decode
			e.markFailed(at + ".spot_price_per_hour")
		}
		if !e.Has(at + ".scale_latency") {
			it.ScaleLatency = c.ScaleLatency
		}
		if !e.Has(at + ".init_latency") {
			it.InitLatency = c.InitLatency
		}
		it.ScaleLatency.inferKind()
		it.InitLatency.inferKind()
		if !e.Has(at + ".profile") {
			it.Profile = e.Profile
		}
		it.Profile.inferKinds()
	}
	if it, ok := e.Candidate(c.InstanceType); ok {
		c.GPUModel, c.GPUsPerNode, c.PricePerHour, c.NetworkGbps = it.GPUModel, it.GPUsPerNode, it.PricePerHour, it.NetworkGbps
		c.SpotPricePerHour, c.Spot.PricePerHour = it.SpotPricePerHour, it.SpotPricePerHour
	}
	return probs
}

// adoptDefaultType makes the spec's profile that of the default type, once the spec is valid:
// what reads the profile alone (the executor's time-outs, the profiler) sees that type's.
func (e *Experiment) adoptDefaultType() {
	if len(e.Cluster.InstanceTypes) == 0 {
		return
	}
	if it, ok := e.Candidate(e.Cluster.InstanceType); ok {
		e.Profile = it.Profile
	}
}

// candidates checks cluster.instance_types and cluster.markets.
func (v *validator) candidates() {
	c := v.e.Cluster
	for i, m := range c.Markets {
		if m != MarketOnDemand && m != MarketSpot {
			v.add(fmt.Sprintf("cluster.markets[%d]", i), "%q is not a market (on-demand or spot)", m)
		} else if slices.Index(c.Markets, m) != i {
			v.add(fmt.Sprintf("cluster.markets[%d]", i), "%q is listed twice", m)
		}
	}
	if len(c.Markets) > 0 && v.e.Has("cluster.market") && !slices.Contains(c.Markets, c.Market) {
		v.add("cluster.market", "%q is not one of markets %v (the default market must be one the planner may choose)", c.Market, c.Markets)
	}
	if v.e.Has("cluster.markets") && len(c.Markets) == 0 {
		v.add("cluster.markets", "lists no market (leave it out for market alone)")
	}
	if c.Hedge && !c.Hedges() {
		v.add("cluster.hedge", "splits a stage between on-demand and spot nodes: it needs both in cluster.markets (markets: [on-demand, spot])")
	}
	if v.e.Has("cluster.instance_types") && len(c.InstanceTypes) == 0 {
		v.add("cluster.instance_types", "lists no instance type (leave it out for instance_type alone)")
	}
	if len(c.InstanceTypes) == 0 {
		return
	}
	if _, ok := v.e.Candidate(c.InstanceType); !ok && v.e.Has("cluster.instance_type") {
		v.add("cluster.instance_type", "%q is not one of instance_types (the default type must be a candidate)", c.InstanceType)
	}
	spot := slices.Contains(c.Markets, MarketSpot) || c.Market == MarketSpot
	for i, it := range c.InstanceTypes {
		at := candidatePath(i)
		if it.InstanceType == "" {
			v.add(at+".instance_type", "is required (the name the provider rents it by)")
		} else if slices.IndexFunc(c.InstanceTypes, func(o InstanceChoice) bool { return o.InstanceType == it.InstanceType }) != i {
			v.add(at+".instance_type", "%q is listed twice", it.InstanceType)
		}
		if it.GPUsPerNode < 1 || it.GPUsPerNode > 1024 {
			v.add(at+".gpus_per_node", "%d is out of range (1 to 1024; or a catalog instance_type)", it.GPUsPerNode)
		}
		if !(it.PricePerHour > 0) || it.PricePerHour > MaxPricePerHour {
			v.add(at+".price_per_hour", "%v is out of range (above 0, at most %d dollars an hour; or a catalog instance_type)", it.PricePerHour, MaxPricePerHour)
		}
		if it.SpotPricePerHour < 0 || it.SpotPricePerHour > MaxPricePerHour {
			v.add(at+".spot_price_per_hour", "%v is out of range (0 to %d dollars an hour)", it.SpotPricePerHour, MaxPricePerHour)
		} else if spot && it.SpotPricePerHour == 0 {
			v.add(at+".spot_price_per_hour", "market spot needs a spot price: give spot_price_per_hour here or cluster.spot.discount")
		}
		if it.NetworkGbps < 0 || it.NetworkGbps > MaxNetworkGbps || it.NetworkGbps > 0 && it.NetworkGbps < MinNetworkGbps {
			v.add(at+".network_gbps", "%v is out of range (0 when unknown, or %v to %d Gb/s)", it.NetworkGbps, MinNetworkGbps, MaxNetworkGbps)
		} else if c.Data.SizeGB > 0 && it.NetworkGbps == 0 {
			v.add(at+".network_gbps", "a dataset to download needs the network bandwidth (set network_gbps or a catalog instance_type)")
		}
		// Inherited latencies and profiles were checked where they were written.
		for _, f := range []string{"scale_latency", "init_latency"} {
			if v.e.Has(at + "." + f) {
				d := it.ScaleLatency
				if f == "init_latency" {
					d = it.InitLatency
				}
				v.dist(at+"."+f, d)
			}
		}
		switch {
		case v.e.Has(at + ".profile"):
			v.profileAt(at+".profile", it.Profile)
		case !v.e.Has("profile"):
			v.add(at+".profile", "is required: give this type's profile (from `rubberband profile --instance-type %s`) or the spec's profile", it.InstanceType)
		}
	}
}

// OnType returns a copy of the experiment whose default type is the candidate named name: the
// cluster's type fields, latencies and the profile are that type's. `rubberband profile
// --instance-type` measures on it.
func (e *Experiment) OnType(name string) (*Experiment, error) {
	it, ok := e.Candidate(name)
	if !ok {
		var names []string
		for _, c := range e.Cluster.InstanceTypes {
			names = append(names, c.InstanceType)
		}
		if len(names) == 0 {
			names = []string{e.Cluster.InstanceType}
		}
		return nil, fmt.Errorf("instance type %q is not a candidate of the spec (%v)", name, names)
	}
	out := *e
	c := &out.Cluster
	c.InstanceType, c.GPUModel, c.GPUsPerNode, c.PricePerHour, c.NetworkGbps = it.InstanceType, it.GPUModel, it.GPUsPerNode, it.PricePerHour, it.NetworkGbps
	c.SpotPricePerHour, c.Spot.PricePerHour = it.SpotPricePerHour, it.SpotPricePerHour
	c.ScaleLatency, c.InitLatency = it.ScaleLatency, it.InitLatency
	out.Profile = it.Profile
	return &out, nil
}
