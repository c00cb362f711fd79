package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// MaxFileSize bounds a spec or profile file: real ones are a few KiB, and a wrong path (a log, a
// disk image) must be refused before it is read into memory.
const MaxFileSize = 4 << 20

// ReadFunc reads a file that a spec refers to (its profile), by a path relative to the spec.
type ReadFunc func(path string) ([]byte, error)

// Load reads, decodes, defaults and validates the spec at path. On any problem it returns the
// Experiment decoded so far and a Problems error listing every problem found.
func Load(path string, opts ...Option) (*Experiment, error) {
	exp, _, err := LoadSource(path, opts...)
	return exp, err
}

// Option changes how a spec is parsed.
type Option func(*parseOptions)

type parseOptions struct {
	catalog InstanceCatalog
	// profileOptional accepts a spec without a profile (see ProfileOptional).
	profileOptional bool
}

// ProfileOptional accepts a spec that gives no profile at all: `rubberband profile` measures
// one, `rubberband init` writes a spec without one and `validate` checks it. Without this
// option such a spec is refused with a *NoProfileError, which says what to run; a profile
// that is given but incomplete is a problem at its field and line either way.
func ProfileOptional() Option {
	return func(o *parseOptions) { o.profileOptional = true }
}

// NoProfileError is a spec without a profile where one is needed (plan, simulate, run): the
// trainer's latencies are measured, never invented, and `rubberband profile` measures them.
type NoProfileError struct {
	File string // the spec, as its path was given
}

func (e *NoProfileError) Error() string {
	return fmt.Sprintf("%s has no profile yet: measure your trainer first with\n\n    rubberband profile %s\n\n"+
		"which runs a few trials' iterations, writes the latencies it measured to a profile file and names that file in the spec",
		e.File, e.File)
}

// MissingProfile reports whether the spec gives no profile at all, where one is needed: no
// profile section, and no candidate instance types (each of which has, or lacks, its own).
func (e *Experiment) MissingProfile() bool {
	return len(e.Cluster.InstanceTypes) == 0 && !e.Has("profile") && !e.unknown("profile")
}

// WithCatalog makes cat the instance types a spec may name and takes their figures from it,
// instead of the built-in catalog's: the caller reads a local catalog file (ReadCatalogFile)
// and passes what it holds, so that parsing itself reads no file behind its back.
func WithCatalog(cat InstanceCatalog) Option {
	return func(o *parseOptions) { o.catalog = cat }
}

func newParseOptions(opts []Option) parseOptions {
	o := parseOptions{catalog: BuiltinCatalog()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Source is a spec as it was read: its file's bytes and those of every file it names (its
// profiles). What was parsed is what a run keeps: it snapshots these bytes and never reads the
// files again, since they may have changed in between.
type Source struct {
	Path  string            // the spec's path, as given
	Data  []byte            // the spec's text
	Files map[string][]byte // each file the spec names, by the name it gives it
}

// LoadSource is Load, and the bytes it parsed. Each file is read once.
func LoadSource(path string, opts ...Option) (*Experiment, *Source, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read spec: %w", err)
	}
	src := &Source{Path: path, Data: data, Files: map[string][]byte{}}
	dir := filepath.Dir(path)
	exp, err := Parse(path, data, func(rel string) ([]byte, error) {
		if b, ok := src.Files[rel]; ok {
			return b, nil
		}
		p := rel
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, rel)
		}
		b, err := ReadFile(p)
		if err == nil {
			src.Files[rel] = b
		}
		return b, err
	}, opts...)
	return exp, src, err
}

// ReadFile reads a spec or profile file of at most MaxFileSize bytes. It refuses anything but a
// regular file (a symbolic link to one is fine) before opening it, since opening a FIFO blocks
// and /dev/zero never ends.
func ReadFile(path string) ([]byte, error) {
	return safefile.Read(path, MaxFileSize, "a spec or profile file")
}

// Parse decodes, defaults and validates a spec held in memory; file names it in problems. read
// loads a profile file when the spec names one; nil refuses profile files. Problems come sorted
// by line, the spec's own before its profile file's. Instance types come from the built-in
// catalog unless WithCatalog gives another. A spec that is valid but gives no profile is
// returned with a *NoProfileError, unless ProfileOptional.
func Parse(file string, data []byte, read ReadFunc, opts ...Option) (*Experiment, error) {
	o := newParseOptions(opts)
	exp := &Experiment{File: file, failed: map[string]bool{}}
	d := newDecoder(file)
	d.document(data, exp)
	exp.lines, exp.gridTrials = d.lines, d.gridTrials
	if d.fatal {
		return exp, d.probs
	}
	for p := range d.failed {
		exp.markFailed(p)
	}
	probs := d.probs
	probs = append(probs, exp.loadProfile(read, o.profileOptional)...)
	probs = append(probs, exp.applyDefaults(o.catalog)...)
	probs = append(probs, exp.validate(true)...)
	if len(probs) == 0 {
		exp.adoptDefaultType()
		if exp.MissingProfile() && !o.profileOptional {
			return exp, &NoProfileError{File: file}
		}
		return exp, nil
	}
	sort.SliceStable(probs, func(i, j int) bool {
		a, b := probs[i], probs[j]
		if a.File != b.File {
			return a.File == file || b.File != file && a.File < b.File
		}
		return a.Line < b.Line
	})
	return exp, probs
}

// loadProfile replaces profile: {file: F} with the profile decoded from F, and each candidate
// instance type's likewise. A file that does not exist yet is the one `rubberband profile` is
// about to write: no problem when the profile is optional (its fields then unknown), and
// otherwise a problem that says to measure it.
func (e *Experiment) loadProfile(read ReadFunc, optional bool) Problems {
	probs := e.loadProfileAt("profile", &e.Profile, read, optional)
	for i := range e.Cluster.InstanceTypes {
		probs = append(probs, e.loadProfileAt(candidatePath(i)+".profile", &e.Cluster.InstanceTypes[i].Profile, read, optional)...)
	}
	return probs
}

// loadProfileAt replaces the profile at path (written as {file: F}) with the one decoded from F.
func (e *Experiment) loadProfileAt(path string, prof *Profile, read ReadFunc, optional bool) Problems {
	if prof.File == "" {
		return nil
	}
	line := e.Line(path + ".file")
	if e.Has(path+".iter_latency") || e.Has(path+".startup_latency") || e.Has(path+".launch_overhead") || e.Has(path+".first_stage_lag") || e.Has(path+".startup_contention") {
		e.markFailed(path + ".file")
		return Problems{{File: e.File, Line: line, Path: path + ".file",
			Msg: "a profile is either a file or inline, not both (remove iter_latency/startup_latency/launch_overhead/first_stage_lag/startup_contention or file)"}}
	}
	if read == nil {
		e.markFailed(path) // unknown, not missing
		return Problems{{File: e.File, Line: line, Path: path + ".file", Msg: "profile files cannot be read here"}}
	}
	data, err := read(prof.File)
	if errors.Is(err, fs.ErrNotExist) {
		e.markFailed(path)
		if optional {
			e.nameProfileFile(path, prof.File)
			return nil
		}
		return Problems{{File: e.File, Line: line, Path: path + ".file",
			Msg: fmt.Sprintf("%s does not exist yet: measure the trainer with `rubberband profile %s`, which writes it", prof.File, e.File)}}
	}
	if err != nil {
		e.markFailed(path)
		return Problems{{File: e.File, Line: line, Path: path + ".file", Msg: fmt.Sprintf("cannot read profile: %v", err)}}
	}
	var p Profile
	d := newDecoder(prof.File)
	d.document(data, &p)
	if d.fatal {
		e.markFailed(path)
		return d.probs
	}
	if p.File != "" {
		d.problem(d.lines["file"], "file", "a profile file cannot point to another file")
	}
	// Field paths of the profile file are recorded under path so validation finds them; lines
	// there belong to the profile file, so remember which file they come from. The spec's own
	// file line stays.
	// slow_nodes may stay inline beside a file (a measured profile rarely sees stragglers): the
	// spec's wins.
	inlineSlow := e.Has(path + ".slow_nodes")
	if inlineSlow {
		p.SlowNodes = prof.SlowNodes
	}
	for k, l := range d.lines {
		if k != "file" && !(inlineSlow && strings.HasPrefix(k, "slow_nodes")) {
			e.lines[path+"."+k] = l
		}
	}
	for k := range d.failed {
		e.markFailed(path + "." + k)
	}
	e.nameProfileFile(path, prof.File)
	p.File = prof.File
	*prof = p
	return d.probs
}

// nameProfileFile records that the profile at path is file's (ProfileFile, ProfileFiles).
func (e *Experiment) nameProfileFile(path, file string) {
	if e.profileFiles == nil {
		e.profileFiles = map[string]string{}
	}
	e.profileFiles[path] = file
}

// applyDefaults fills fields the spec left out: first from the instance catalog, then the
// design's defaults. Fields written in the spec always win; one written but not decoded stays
// unset rather than defaulted, so that it is not taken for a value the user gave.
func (e *Experiment) applyDefaults(cat InstanceCatalog) Problems {
	var probs Problems
	c := &e.Cluster
	if len(c.InstanceTypes) > 0 && !e.Has("cluster.instance_type") {
		c.InstanceType = c.InstanceTypes[0].InstanceType // the default type is the first candidate
	}
	// With instance_types the type's fields are its candidate's (candidateDefaults).
	if len(c.InstanceTypes) == 0 && (c.InstanceType != "" || e.unknown("cluster.instance_type")) {
		it, ok := cat.Lookup(c.InstanceType)
		if !ok && !e.unknown("cluster.instance_type") {
			probs = append(probs, Problem{File: e.File, Line: e.Line("cluster.instance_type"), Path: "cluster.instance_type",
				Msg: fmt.Sprintf("unknown instance type %q (%s; or leave it out and set gpus_per_node and price_per_hour)", c.InstanceType, cat.unknownHint(c.InstanceType))})
		}
		fill := func(path string, set func()) {
			switch {
			case e.Has(path):
			case ok:
				set()
			default: // the catalog could not fill it: unknown, like a field that failed to decode
				e.markFailed(path)
			}
		}
		fill("cluster.gpus_per_node", func() { c.GPUsPerNode = it.GPUs })
		fill("cluster.price_per_hour", func() { c.PricePerHour = it.PricePerHour })
		// A spot price given under either name, or as a discount, leaves the catalog's unused.
		if !e.Has(pathSpotPrice) && !e.Has(pathSpotPriceNew) && !e.Has(pathDiscount) {
			fill(pathSpotPrice, func() { c.SpotPricePerHour = it.SpotPricePerHour })
		}
		fill("cluster.gpu_model", func() { c.GPUModel = it.GPUModel })
		fill("cluster.network_gbps", func() { c.NetworkGbps = it.NetworkGbps })
	}
	probs = append(probs, e.spotDefaults()...)
	if c.Market == "" && len(c.Markets) > 0 && !e.unknown("cluster.markets[0]") {
		c.Market = c.Markets[0]
	}
	if !e.Has("cluster.hedge") {
		c.Hedge = slices.Contains(c.Markets, MarketOnDemand) && slices.Contains(c.Markets, MarketSpot)
	}
	if c.EC2 != nil && !e.Has("cluster.ec2.watchdog") {
		c.EC2.Watchdog = DefaultWatchdog
	}
	if c.Market == "" && !e.unknown("cluster.market") {
		c.Market = MarketOnDemand
	}
	if c.Billing.Model == "" && !e.unknown("cluster.billing.model") {
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
	for _, dist := range []*Dist{&c.ScaleLatency, &c.InitLatency} {
		dist.inferKind()
	}
	e.Profile.inferKinds()
	probs = append(probs, e.candidateDefaults(cat)...)
	if e.Trainer.Resources.CPUMHz == 0 && !e.unknown("trainer.resources.cpu_mhz") {
		e.Trainer.Resources.CPUMHz = 500
	}
	if e.Trainer.Resources.MemoryMB == 0 && !e.unknown("trainer.resources.memory_mb") {
		e.Trainer.Resources.MemoryMB = 512
	}
	e.objectiveDefaults()
	if e.Planner.Name == "" && !e.unknown("planner.name") {
		e.Planner.Name = PlannerGreedy
	}
	if e.Planner.Samples == 0 && !e.Has("planner.samples") {
		e.Planner.Samples = 100
	}
	if e.Planner.DeadlineQuantile == 0 && !e.Has("planner.deadline_quantile") {
		e.Planner.DeadlineQuantile = 0.5
	}
	if h := e.Algorithm.Hyperband; h != nil && h.Rounds == 0 && !e.Has("algorithm.hyperband.rounds") {
		h.Rounds = 1
	}
	if a := e.Algorithm.ASHA; a != nil && a.Brackets == 0 && !e.Has("algorithm.asha.brackets") {
		a.Brackets = 1
	}
	e.samplerDefaults()
	return probs
}

// inferKinds names the profile's distributions that the spec left unnamed.
func (p *Profile) inferKinds() {
	p.StartupLatency.inferKind()
	p.LaunchOverhead.inferKind()
	p.FirstStageLag.inferKind()
	for g, dist := range p.IterLatency {
		dist.inferKind()
		p.IterLatency[g] = dist
	}
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

// WorkdirFor is the folder the trainer's command runs in for a spec read from specPath:
// trainer.workdir, resolved against the spec file's folder when relative, or that folder when
// the spec names none. It is absolute when specPath's folder can be made so.
func (e *Experiment) WorkdirFor(specPath string) string {
	dir := filepath.Dir(specPath)
	if w := e.Trainer.Workdir; w != "" {
		if filepath.IsAbs(w) {
			return filepath.Clean(w)
		}
		dir = filepath.Join(dir, w)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// CheckWorkdir says, as a Problem at trainer.workdir's line, when the folder the trainer would
// run in (WorkdirFor) is not one on this machine.
func (e *Experiment) CheckWorkdir(specPath string) error {
	dir := e.WorkdirFor(specPath)
	st, err := os.Stat(dir)
	msg := ""
	switch {
	case err != nil:
		msg = fmt.Sprintf("the trainer's folder %s: %v", dir, errors.Unwrap(err))
		if errors.Unwrap(err) == nil {
			msg = err.Error()
		}
	case !st.IsDir():
		msg = fmt.Sprintf("the trainer's folder %s is not a folder", dir)
	default:
		return nil
	}
	line := e.Line("trainer.workdir")
	if line == 0 {
		line = e.Line("trainer")
	}
	return Problems{{File: e.File, Line: line, Path: "trainer.workdir", Msg: msg + " (it defaults to the spec file's folder; relative paths resolve against that folder)"}}
}

// ShipsCode says whether the trainer's folder travels with the run where the trainer runs on
// other machines: for a command, always; for an image, which holds its own code, only when the
// spec names trainer.workdir.
func (e *Experiment) ShipsCode() bool {
	return e.Trainer.Image == "" || e.Has("trainer.workdir")
}

// objectiveDefaults fills in each objective's mode (max, but min for cost_usd: dollars are never
// wanted more) and makes Objectives and Objective agree: objective: alone is the one objective;
// with objectives:, Objective is their first. Both written is validate's to refuse.
func (e *Experiment) objectiveDefaults() {
	defaultMode := func(o *Objective, path string) {
		if o.Mode == "" && !e.unknown(path+".mode") {
			o.Mode = "max"
			if o.Metric == CostMetric {
				o.Mode = "min"
			}
		}
	}
	if !e.Has("objectives") {
		defaultMode(&e.Objective, "objective")
		e.Objectives = []Objective{e.Objective}
		return
	}
	for i := range e.Objectives {
		defaultMode(&e.Objectives[i], fmt.Sprintf("objectives[%d]", i))
	}
	if !e.Has("objective") && len(e.Objectives) > 0 {
		e.Objective = e.Objectives[0]
	}
}
