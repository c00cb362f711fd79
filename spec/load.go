package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ReadFunc reads a file that a spec refers to (its profile), by a path relative to the spec.
type ReadFunc func(path string) ([]byte, error)

// Load reads, decodes, defaults and validates the spec at path. On any problem it returns the
// Experiment decoded so far and a Problems error listing every problem found.
func Load(path string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	dir := filepath.Dir(path)
	return Parse(path, data, func(rel string) ([]byte, error) {
		if !filepath.IsAbs(rel) {
			rel = filepath.Join(dir, rel)
		}
		return os.ReadFile(rel)
	})
}

// Parse decodes, defaults and validates a spec held in memory; file names it in problems. read
// loads a profile file when the spec names one; nil refuses profile files.
func Parse(file string, data []byte, read ReadFunc) (*Experiment, error) {
	exp := &Experiment{File: file}
	d := newDecoder(file)
	d.document(data, exp)
	exp.lines = d.lines
	probs := d.probs
	probs = append(probs, exp.loadProfile(read)...)
	probs = append(probs, exp.applyDefaults()...)
	if len(d.probs) == 0 { // validating a half-decoded spec would only repeat its decode errors
		probs = append(probs, exp.Validate()...)
	}
	if len(probs) > 0 {
		return exp, probs
	}
	return exp, nil
}

// loadProfile replaces profile: {file: F} with the profile decoded from F.
func (e *Experiment) loadProfile(read ReadFunc) Problems {
	if e.Profile.File == "" {
		return nil
	}
	line := e.Line("profile.file")
	if e.Has("profile.iter_latency") || e.Has("profile.startup_latency") {
		return Problems{{File: e.File, Line: line, Path: "profile.file",
			Msg: "a profile is either a file or inline, not both (remove iter_latency/startup_latency or file)"}}
	}
	if read == nil {
		return Problems{{File: e.File, Line: line, Path: "profile.file", Msg: "profile files cannot be read here"}}
	}
	data, err := read(e.Profile.File)
	if err != nil {
		return Problems{{File: e.File, Line: line, Path: "profile.file", Msg: fmt.Sprintf("cannot read profile: %v", err)}}
	}
	var p Profile
	d := newDecoder(e.Profile.File)
	d.document(data, &p)
	if p.File != "" {
		d.problem(d.lines["file"], "file", "a profile file cannot point to another file")
	}
	// Field paths of the profile file are recorded under "profile." so validation finds them;
	// lines there belong to the profile file, so remember which file they come from.
	for k, l := range d.lines {
		e.lines["profile."+k] = l
	}
	e.profileFile = e.Profile.File
	p.File = e.Profile.File
	e.Profile = p
	return d.probs
}

// applyDefaults fills fields the spec left out: first from the instance catalog, then the
// design's defaults. Fields written in the spec always win.
func (e *Experiment) applyDefaults() Problems {
	c := &e.Cluster
	if c.InstanceType != "" {
		it, ok := LookupInstance(c.InstanceType)
		if !ok {
			return Problems{{File: e.File, Line: e.Line("cluster.instance_type"), Path: "cluster.instance_type",
				Msg: fmt.Sprintf("unknown instance type %q (catalog: %v; or leave it out and set gpus_per_node and price_per_hour)", c.InstanceType, catalogNames())}}
		}
		if !e.Has("cluster.gpus_per_node") {
			c.GPUsPerNode = it.GPUs
		}
		if !e.Has("cluster.price_per_hour") {
			c.PricePerHour = it.PricePerHour
		}
		if !e.Has("cluster.spot_price_per_hour") {
			c.SpotPricePerHour = it.SpotPricePerHour
		}
		if !e.Has("cluster.gpu_model") {
			c.GPUModel = it.GPUModel
		}
		if !e.Has("cluster.network_gbps") {
			c.NetworkGbps = it.NetworkGbps
		}
	}
	if c.Market == "" {
		c.Market = MarketOnDemand
	}
	if c.Billing.Model == "" {
		c.Billing.Model = PerInstance
	}
	if !e.Has("cluster.billing.increment") {
		c.Billing.Increment = Duration(time.Second)
	}
	if !e.Has("cluster.billing.minimum") && c.Billing.Model == PerInstance {
		c.Billing.Minimum = Duration(time.Minute)
	}
	if !e.Has("cluster.max_nodes") {
		c.MaxNodes = 64
	}
	for _, dist := range []*Dist{&c.ScaleLatency, &c.InitLatency, &e.Profile.StartupLatency} {
		dist.inferKind()
	}
	for g, dist := range e.Profile.IterLatency {
		dist.inferKind()
		e.Profile.IterLatency[g] = dist
	}
	if e.Trainer.Resources.CPUMHz == 0 {
		e.Trainer.Resources.CPUMHz = 500
	}
	if e.Trainer.Resources.MemoryMB == 0 {
		e.Trainer.Resources.MemoryMB = 512
	}
	if e.Objective.Mode == "" {
		e.Objective.Mode = "max"
	}
	if e.Planner.Name == "" {
		e.Planner.Name = PlannerGreedy
	}
	if e.Planner.Samples == 0 && !e.Has("planner.samples") {
		e.Planner.Samples = 100
	}
	if e.Planner.DeadlineQuantile == 0 && !e.Has("planner.deadline_quantile") {
		e.Planner.DeadlineQuantile = 0.5
	}
	return nil
}

// inferKind names the distribution a spec left unnamed by the fields it gave: value means
// constant, mean (and std) normal, min and max uniform, samples empirical; nothing at all is a
// constant 0.
func (d *Dist) inferKind() {
	if d.Kind != "" {
		return
	}
	switch {
	case d.Mean != 0 || d.Std != 0:
		d.Kind = DistNormal
	case d.Min != 0 || d.Max != 0:
		d.Kind = DistUniform
	case len(d.Samples) > 0:
		d.Kind = DistEmpirical
	default:
		d.Kind = DistConstant
	}
}
