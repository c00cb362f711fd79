package spec

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Limits that keep a spec within what the planner and executor can handle, and its numbers
// finite through every sum and product: each is far above any real experiment (the largest the
// benchmarks run has 10,000 trials). docs/spec.md lists them.
const (
	MaxTrials = 1_000_000
	// MaxRounds bounds algorithm.hyperband.rounds.
	MaxRounds  = 1000
	MaxIters   = 1_000_000_000
	MaxSamples = 100_000
	// MaxStages bounds explicit stages; SHA and Hyperband within MaxTrials expand to at most
	// about 20 per bracket.
	MaxStages = 100
	// MaxTrialRuns bounds the trials of every stage added up, which the simulator holds in
	// memory once per run. SHA and Hyperband within MaxTrials stay under it (each stage keeps at
	// most half the previous one's trials); explicit stages need not.
	MaxTrialRuns = 2 * MaxTrials
	// MaxDeadline is a year.
	MaxDeadline = Duration(365 * 24 * time.Hour)
	// MaxPricePerHour bounds a node's on-demand and spot prices, in dollars.
	MaxPricePerHour = 100_000
	// MaxPricePerGB and MaxDataGB bound the dataset each new node downloads.
	MaxPricePerGB = 1_000
	MaxDataGB     = 1_000_000
	// MinNetworkGbps and MaxNetworkGbps bound a node's bandwidth when one is given.
	MinNetworkGbps = 0.001
	MaxNetworkGbps = 100_000
	// MaxNameLen is a DNS label's length: the name ends up in job names and tags.
	MaxNameLen = 63
	// MaxParams, MaxParamNameLen and MaxChoiceValues bound the search space.
	MaxParams       = 1_000
	MaxParamNameLen = 64
	MaxChoiceValues = 10_000
	// MaxEnvKeyLen and MaxTrainerBytes bound what each launch passes to the trainer: its command,
	// image and environment together.
	MaxEnvKeyLen    = 256
	MaxTrainerBytes = 128 << 10
)

var (
	nameRE  = lazyRegexp(`^[a-z0-9-]+$`)
	paramRE = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

type validator struct {
	e     *Experiment
	probs Problems
}

// add reports a problem at path, unless the value there is unknown (see Experiment.unknown).
func (v *validator) add(path, format string, args ...any) {
	if v.e.unknown(path) {
		return
	}
	// The line is that of path or its nearest written ancestor; it is in a profile file when
	// that ancestor came from there.
	file, line := v.e.File, 0
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := v.e.lines[p]; ok {
			line = l
			for prof, f := range v.e.profileFiles {
				if strings.HasPrefix(p, prof+".") && p != prof+".file" {
					file = f
				}
			}
			break
		}
	}
	v.probs = append(v.probs, Problem{File: file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// addUnless reports a problem unless skip: another check reports it where it belongs.
func (v *validator) addUnless(skip bool, path, format string, args ...any) {
	if !skip {
		v.add(path, format, args...)
	}
}

// Validate checks a decoded, defaulted spec and returns every problem it finds, a missing
// profile included.
func (e *Experiment) Validate() Problems { return e.validate(false) }

// validate is Validate; noProfileOK leaves a profile that is missing altogether to the caller
// (Parse, which refuses it with a NoProfileError unless ProfileOptional).
func (e *Experiment) validate(noProfileOK bool) Problems {
	v := &validator{e: e}
	if len(e.Name) > MaxNameLen {
		v.add("name", "is %d characters long (at most %d: it becomes part of job names and tags)", len(e.Name), MaxNameLen)
	} else if !nameRE().MatchString(e.Name) {
		v.add("name", "%q is not a valid name (lowercase letters, digits and '-', not empty)", e.Name)
	}
	if e.Deadline < 0 || e.Deadline > MaxDeadline {
		v.add("deadline", "%s is out of range (0 to one year)", e.Deadline.D())
	}
	v.objectives()
	v.algorithm()
	v.searchSpace()
	v.conditions()
	v.sampler()
	v.trainer()
	v.cluster()
	if (len(e.Cluster.InstanceTypes) == 0 || e.Has("profile")) && !(noProfileOK && e.MissingProfile()) { // else every candidate has its own
		v.profile()
	}
	v.planner()
	v.costCap()
	v.checkpoints()
	return v.probs
}

// ParseCheckpoints splits a checkpoints URL into its scheme ("file" or "s3") and the rest: a
// directory, or a bucket and a prefix.
func ParseCheckpoints(url string) (scheme, dirOrBucket, prefix string, err error) {
	switch {
	case url == "":
		return "file", "", "", nil
	case strings.HasPrefix(url, "file://"):
		dir := strings.TrimPrefix(url, "file://")
		if dir == "" {
			return "", "", "", fmt.Errorf("file:// needs a directory")
		}
		return "file", dir, "", nil
	case strings.HasPrefix(url, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
		if !bucketRE().MatchString(bucket) {
			return "", "", "", fmt.Errorf("%q is not a bucket name (3-63 lowercase letters, digits, '.', '-')", bucket)
		}
		prefix = strings.Trim(prefix, "/")
		if prefix != "" {
			for _, seg := range strings.Split(prefix, "/") {
				if seg == "" || seg == "." || seg == ".." {
					return "", "", "", fmt.Errorf("prefix %q holds an empty, '.' or '..' segment", prefix)
				}
			}
		}
		return "s3", bucket, prefix, nil
	default:
		return "", "", "", fmt.Errorf("%q is not a checkpoint URL (file://DIR or s3://BUCKET/PREFIX)", url)
	}
}

var bucketRE = lazyRegexp(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func (v *validator) checkpoints() {
	c := v.e.Checkpoints
	scheme, _, _, err := ParseCheckpoints(c.URL)
	if err != nil {
		v.add("checkpoints.url", "%v", err)
		return
	}
	if scheme != "s3" && (c.Endpoint != "" || c.Insecure || c.Region != "") {
		v.add("checkpoints", "endpoint, insecure and region are for s3:// checkpoints")
	}
	if c.Endpoint != "" && (strings.Contains(c.Endpoint, "/") || !strings.Contains(c.Endpoint, ":")) {
		v.add("checkpoints.endpoint", "%q is not host:port", c.Endpoint)
	}
}

func (v *validator) algorithm() {
	a := v.e.Algorithm
	set := 0
	if a.SHA != nil {
		set++
	}
	if a.Hyperband != nil {
		set++
	}
	if a.Stages != nil {
		set++
	}
	if a.ASHA != nil {
		set++
	}
	if set != 1 {
		v.add("algorithm", "give exactly one of sha, hyperband, asha or stages (found %d)", set)
		return
	}
	switch {
	case a.ASHA != nil:
		v.asha(a.ASHA)
	case a.SHA != nil:
		if v.e.gridTrials == "" || a.SHA.Trials != 0 { // else the sampler says why the grid has no size
			v.positive("algorithm.sha.trials", a.SHA.Trials, MaxTrials)
		}
		v.budget("algorithm.sha", a.SHA.MinIters, a.SHA.MaxIters, a.SHA.Eta)
	case a.Hyperband != nil:
		rounds := v.positive("algorithm.hyperband.rounds", a.Hyperband.Rounds, MaxRounds)
		if v.budget("algorithm.hyperband", a.Hyperband.MinIters, a.Hyperband.MaxIters, a.Hyperband.Eta) && rounds {
			total := 0
			for _, b := range a.Brackets() {
				total += b.Stages[0].Trials
			}
			if total > MaxTrials {
				v.add("algorithm.hyperband", "expands to %d trials (at most %d): raise min_iters or eta, or fewer rounds", total, MaxTrials)
			}
		}
	default:
		if len(a.Stages) == 0 {
			v.add("algorithm.stages", "needs at least one stage")
		}
		if len(a.Stages) > MaxStages {
			v.add("algorithm.stages", "holds %d stages (at most %d)", len(a.Stages), MaxStages)
			return
		}
		ok, iters, runs := true, 0, 0
		for i, s := range a.Stages {
			p := fmt.Sprintf("algorithm.stages[%d]", i)
			if p+".trials" != v.e.gridTrials || s.Trials != 0 {
				ok = v.positive(p+".trials", s.Trials, MaxTrials) && ok
			}
			ok = v.positive(p+".iters", s.Iters, MaxIters) && ok
			if i > 0 && s.Trials > a.Stages[i-1].Trials {
				v.add(p+".trials", "%d trials follow a stage of %d (a stage keeps some of the previous stage's trials)", s.Trials, a.Stages[i-1].Trials)
			}
			iters += s.Iters
			runs += s.Trials
		}
		// The sums say something only when every stage is in range.
		if ok && iters > MaxIters {
			v.add("algorithm.stages", "train %d iterations in all (at most %d)", iters, MaxIters)
		}
		if ok && runs > MaxTrialRuns {
			v.add("algorithm.stages", "run %d trials in all, counting each trial once per stage (at most %d)", runs, MaxTrialRuns)
		}
	}
}

// budget checks min_iters, max_iters and eta; it reports whether all three are usable, whether
// or not a problem was reported (a field that failed to decode is not).
func (v *validator) budget(path string, minIters, maxIters, eta int) bool {
	ok := v.positive(path+".min_iters", minIters, MaxIters)
	ok = v.positive(path+".max_iters", maxIters, MaxIters) && ok
	if ok && maxIters < minIters {
		v.add(path+".max_iters", "%d is below min_iters %d", maxIters, minIters)
		ok = false
	}
	if eta < 2 || eta > 1000 {
		v.add(path+".eta", "%d is not a reduction factor (an integer from 2 to 1000)", eta)
		ok = false
	}
	return ok
}

// positive checks 1 <= n <= max and reports whether it holds.
func (v *validator) positive(path string, n, max int) bool {
	if n < 1 || n > max {
		v.add(path, "%d is out of range (1 to %d)", n, max)
		return false
	}
	return true
}

func (v *validator) searchSpace() {
	if len(v.e.SearchSpace) > MaxParams {
		v.add("search_space", "holds %d parameters (at most %d)", len(v.e.SearchSpace), MaxParams)
		return
	}
	for _, name := range sortedKeys(v.e.SearchSpace) {
		p := v.e.SearchSpace[name]
		path := "search_space." + name
		if len(name) > MaxParamNameLen {
			v.add(path, "the name is %d characters long (at most %d)", len(name), MaxParamNameLen)
		} else if !paramRE().MatchString(name) {
			v.add(path, "not a parameter name (a letter or '_', then letters, digits, '_' or '-')")
		}
		switch p.Type {
		case "uniform", "loguniform", "int":
			if !(p.Min < p.Max) && !(p.Type == "int" && p.Min == p.Max) {
				v.add(path+".max", "%v must be above min %v", p.Max, p.Min)
			} else if p.Type == "uniform" && math.IsInf(p.Max-p.Min, 0) {
				v.add(path, "the range from min %v to max %v is too wide to sample (max-min overflows)", p.Min, p.Max)
			}
			if p.Type == "loguniform" && p.Min <= 0 {
				v.add(path+".min", "%v must be above 0 for loguniform", p.Min)
			}
			if p.Type == "int" && (p.Min != math.Trunc(p.Min) || p.Max != math.Trunc(p.Max) || math.Abs(p.Min) > 1e15 || math.Abs(p.Max) > 1e15) {
				v.add(path, "int bounds must be whole numbers below 1e15 (min %v, max %v)", p.Min, p.Max)
			}
			if len(p.Values) > 0 {
				v.add(path+".values", "only choice takes values")
			}
		case "choice":
			if len(p.Values) == 0 || len(p.Values) > MaxChoiceValues {
				v.add(path+".values", "choice needs 1 to %d values (found %d)", MaxChoiceValues, len(p.Values))
			}
			if v.e.Has(path+".min") || v.e.Has(path+".max") {
				v.add(path, "choice takes values, not min/max")
			}
		default:
			v.add(path+".type", "%q is not a parameter type (uniform, loguniform, int or choice)", p.Type)
		}
	}
}

func (v *validator) trainer() {
	t := v.e.Trainer
	if t.Image != "" && len(t.Command) == 0 {
		v.add("trainer.command", "an image needs the command to run in it (for example [/rubberband, trainer, mlp])")
	}
	if v.e.Has("trainer.command") && len(t.Command) == 0 {
		v.add("trainer.command", "must not be empty")
	}
	if t.Resources.CPUMHz < 0 || t.Resources.CPUMHz > 10_000_000 {
		v.add("trainer.resources.cpu_mhz", "%d is out of range (1 to 10000000)", t.Resources.CPUMHz)
	}
	if t.Resources.MemoryMB < 0 || t.Resources.MemoryMB > 100_000_000 {
		v.add("trainer.resources.memory_mb", "%d is out of range (1 to 100000000)", t.Resources.MemoryMB)
	}
	if t.Timeout < 0 {
		v.add("trainer.timeout", "must not be negative (0: three times the predicted duration)")
	}
	if v.e.Has("trainer.workdir") && !v.e.unknown("trainer.workdir") {
		switch {
		case strings.TrimSpace(t.Workdir) == "":
			v.add("trainer.workdir", "must not be empty (leave it out for the spec file's folder)")
		case strings.ContainsRune(t.Workdir, 0):
			v.add("trainer.workdir", "holds a NUL byte, which no path can")
		case len(t.Workdir) > 4096:
			v.add("trainer.workdir", "is %d bytes long (at most 4096)", len(t.Workdir))
		}
	}
	size := len(t.Image)
	for i, arg := range t.Command {
		size += len(arg)
		if strings.ContainsRune(arg, 0) {
			v.add(fmt.Sprintf("trainer.command[%d]", i), "holds a NUL byte, which no process argument can")
		}
	}
	for _, k := range sortedKeys(t.Env) {
		size += len(k) + len(t.Env[k])
		switch {
		case len(k) > MaxEnvKeyLen:
			v.add("trainer.env."+k, "the name is %d bytes long (at most %d)", len(k), MaxEnvKeyLen)
		case k == "" || strings.ContainsAny(k, "= \t\n\x00"):
			v.add("trainer.env."+k, "not a valid environment variable name")
		case strings.ContainsRune(t.Env[k], 0):
			v.add("trainer.env."+k, "holds a NUL byte, which no environment variable can")
		}
	}
	if size > MaxTrainerBytes {
		v.add("trainer", "command, image and env hold %d bytes (at most %d)", size, MaxTrainerBytes)
	}
}

func (v *validator) cluster() {
	c := v.e.Cluster
	// With instance_types the type's fields are the default candidate's, which candidates() checks.
	typed := len(c.InstanceTypes) > 0
	if c.GPUsPerNode < 1 || c.GPUsPerNode > 1024 {
		v.addUnless(typed, "cluster.gpus_per_node", "%d is out of range (1 to 1024; or set instance_type)", c.GPUsPerNode)
	}
	if !(c.PricePerHour > 0) || c.PricePerHour > MaxPricePerHour {
		v.addUnless(typed, "cluster.price_per_hour", "%v is out of range (above 0, at most %d dollars an hour; or set instance_type)", c.PricePerHour, MaxPricePerHour)
	}
	// A tiny positive bandwidth would make a download take forever (or +Inf seconds).
	if c.NetworkGbps < 0 || c.NetworkGbps > MaxNetworkGbps || c.NetworkGbps > 0 && c.NetworkGbps < MinNetworkGbps {
		v.addUnless(typed, "cluster.network_gbps", "%v is out of range (0 when unknown, or %v to %d Gb/s)", c.NetworkGbps, MinNetworkGbps, MaxNetworkGbps)
	}
	switch c.Market {
	case MarketOnDemand, MarketSpot: // spot() checks that spot has a price
	default:
		v.add("cluster.market", "%q is not a market (on-demand or spot)", c.Market)
	}
	switch c.Billing.Model {
	case PerInstance, PerFunction:
	default:
		v.add("cluster.billing.model", "%q is not a billing model (per-instance or per-function)", c.Billing.Model)
	}
	if c.Billing.Increment <= 0 {
		v.add("cluster.billing.increment", "must be above 0 (for example 1s)")
	}
	if c.Billing.Minimum < 0 {
		v.add("cluster.billing.minimum", "must not be negative")
	}
	v.dist("cluster.scale_latency", c.ScaleLatency)
	v.dist("cluster.init_latency", c.InitLatency)
	if c.MaxNodes < 1 || c.MaxNodes > 100000 {
		v.add("cluster.max_nodes", "%d is out of range (1 to 100000)", c.MaxNodes)
	}
	if c.Data.SizeGB < 0 || c.Data.SizeGB > MaxDataGB {
		v.add("cluster.data.size_gb", "%v is out of range (0 to %d GB)", c.Data.SizeGB, MaxDataGB)
	}
	if c.Data.PricePerGB < 0 || c.Data.PricePerGB > MaxPricePerGB {
		v.add("cluster.data.price_per_gb", "%v is out of range (0 to %d dollars a GB)", c.Data.PricePerGB, MaxPricePerGB)
	}
	if c.Data.SizeGB > 0 && c.NetworkGbps == 0 {
		v.addUnless(typed, "cluster.network_gbps", "a dataset to download needs the network bandwidth (set network_gbps or instance_type)")
	}
	v.spot()
	v.candidates()
	v.ec2()
	v.nomadPool()
	v.kubernetes()
}

// maxLatency bounds any latency a distribution may produce: a year, far beyond any deadline.
const maxLatency = 365 * 24 * 3600

// latency says whether x, written at path, is a latency (0 to a year), and the problem if not.
func (v *validator) latency(path string, x Seconds) bool {
	if f := float64(x); f < 0 || f > maxLatency || math.IsNaN(f) {
		v.add(path, "%v s is out of range (0 to one year)", f)
		return false
	}
	return true
}

// gpuCount says the problem with g, a GPU count written as a key at path, if it is not one.
func (v *validator) gpuCount(path string, g int) {
	if g < 1 || g > 1<<20 {
		v.add(path, "%d is not a GPU count (1 or more)", g)
	}
}

func (v *validator) dist(path string, d Dist) {
	if v.e.unknown(path + ".dist") { // the other fields cannot be judged without the kind
		return
	}
	bad := func(field string, x Seconds) bool { return !v.latency(path+"."+field, x) }
	unused := func(fields ...string) {
		for _, f := range fields {
			if v.e.Has(path + "." + f) {
				v.add(path+"."+f, "not used by dist %s", d.Kind)
			}
		}
	}
	switch d.Kind {
	case DistConstant:
		bad("value", d.Value)
		unused("mean", "std", "min", "max", "samples")
	case DistNormal, DistLogNormal:
		bad("mean", d.Mean)
		bad("std", d.Std)
		if d.Kind == DistLogNormal && d.Mean == 0 && d.Std > 0 {
			v.add(path+".mean", "lognormal needs a mean above 0")
		}
		unused("value", "min", "max", "samples")
	case DistUniform:
		if !bad("min", d.Min) && !bad("max", d.Max) && d.Max < d.Min {
			v.add(path+".max", "%v s is below min %v s", float64(d.Max), float64(d.Min))
		}
		unused("value", "mean", "std", "samples")
	case DistEmpirical:
		if len(d.Samples) == 0 {
			v.add(path+".samples", "empirical needs at least one sample")
		}
		for i, s := range d.Samples {
			bad(fmt.Sprintf("samples[%d]", i), s)
		}
		unused("value", "mean", "std", "min", "max")
	default:
		v.add(path+".dist", "%q is not a distribution (constant, normal, lognormal, uniform or empirical)", d.Kind)
	}
}

func (v *validator) profile() { v.profileAt("profile", v.e.Profile) }

// profileAt checks the profile written at path: the spec's, or a candidate instance type's.
func (v *validator) profileAt(at string, p Profile) {
	if len(p.IterLatency) == 0 {
		v.add(at+".iter_latency", "is required: seconds per iteration of one trial at each measured GPU count (from `rubberband profile`)")
	} else if _, ok := p.IterLatency[1]; !ok {
		v.add(at+".iter_latency", "needs an entry for 1 GPU (trials run on one GPU each when a stage has fewer GPUs than trials)")
	}
	for _, g := range sortedKeys(p.IterLatency) {
		path := fmt.Sprintf("%s.iter_latency.%d", at, g)
		v.gpuCount(path, g)
		d := p.IterLatency[g]
		v.dist(path, d)
		if d.Kind == DistNormal || d.Kind == DistLogNormal {
			if !(d.Mean > 0) {
				v.add(path+".mean", "an iteration must take some time (mean above 0)")
			}
		}
	}
	v.dist(at+".startup_latency", p.StartupLatency)
	v.dist(at+".launch_overhead", p.LaunchOverhead)
	v.dist(at+".first_stage_lag", p.FirstStageLag)
	v.latency(at+".startup_contention", p.StartupContention.All)
	for _, g := range sortedKeys(p.StartupContention.ByGPUs) {
		path := fmt.Sprintf("%s.startup_contention.%d", at, g)
		v.gpuCount(path, g)
		v.latency(path, p.StartupContention.ByGPUs[g])
	}
	if sn := p.SlowNodes; !(sn.Share >= 0 && sn.Share <= 1) {
		v.add(at+".slow_nodes.share", "%v is out of range (0 to 1: the share of nodes that are slow)", sn.Share)
	} else if sn.Share > 0 && !(sn.Factor >= 1 && sn.Factor <= MaxSlowFactor) {
		v.add(at+".slow_nodes.factor", "%v is out of range (1 to %d: how many times longer a trial takes on a slow node)", sn.Factor, MaxSlowFactor)
	}
}

func (v *validator) costCap() {
	if b := v.e.Budget.MaxCostUSD; !(b >= 0 && b <= MaxBudget) {
		v.add("budget.max_cost_usd", "%v is out of range (0 to %d dollars; 0: no cap)", b, MaxBudget)
	}
}

// MaxSlowFactor bounds how much slower a slow node is.
const MaxSlowFactor = 100

func (v *validator) planner() {
	p := v.e.Planner
	switch p.Name {
	case PlannerStatic, PlannerNaiveElastic, PlannerGreedy, PlannerOptimal:
	default:
		v.add("planner.name", "%q is not a planner (%s)", p.Name, strings.Join(PlannerNames(), ", "))
	}
	if p.Samples < 1 || p.Samples > MaxSamples {
		v.add("planner.samples", "%d is out of range (1 to %d)", p.Samples, MaxSamples)
	}
	if !(p.DeadlineQuantile > 0 && p.DeadlineQuantile <= 1) {
		v.add("planner.deadline_quantile", "%v is out of range (above 0, at most 1; 0.5 plans for the median run)", p.DeadlineQuantile)
	}
}

// lazyRegexp compiles its pattern on first use: initialising this package stays cheap for the
// trainers that load a spec at every start (a launch of the synthetic trainer).
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// MaxObjectives and MaxConstraints bound a spec's lists: promotion sorts a rung's results by
// dominance, whose cost grows with both.
const (
	MaxObjectives  = 8
	MaxConstraints = 32
)

// objectives checks objective or objectives (one of them), and constraints.
func (v *validator) objectives() {
	e := v.e
	list, path := e.Objectives, func(i int) string { return fmt.Sprintf("objectives[%d]", i) }
	switch {
	case e.Has("objective") && e.Has("objectives"):
		v.add("objectives", "and objective are both given: objective for one metric, objectives for several")
		return
	case !e.Has("objectives"):
		list, path = []Objective{e.Objective}, func(int) string { return "objective" }
	case len(list) == 0:
		v.add("objectives", "is empty: list the metrics to rank by, such as [{metric: val_accuracy, mode: max}, {metric: cost_usd}]")
		return
	case len(list) > MaxObjectives:
		v.add("objectives", "lists %d objectives (at most %d)", len(list), MaxObjectives)
		return
	}
	seen := map[string]int{}
	for i, o := range list {
		p := path(i)
		switch {
		case o.Metric == "":
			v.add(p+".metric", "is required (the metric the trainer reports, such as val_accuracy, or %s)", CostMetric)
		case o.Mode != "max" && o.Mode != "min":
			v.add(p+".mode", "%q is not a mode (max or min)", o.Mode)
		case o.Metric == CostMetric && o.Mode != "min":
			v.add(p+".mode", "%s is the trial's cost in dollars: its mode is min", CostMetric)
		}
		if j, dup := seen[o.Metric]; dup && o.Metric != "" {
			v.add(p+".metric", "%q is already objective %d", o.Metric, j)
		}
		seen[o.Metric] = i
	}
	if len(e.Constraints) > MaxConstraints {
		v.add("constraints", "lists %d constraints (at most %d)", len(e.Constraints), MaxConstraints)
		return
	}
	for i, c := range e.Constraints {
		p := fmt.Sprintf("constraints[%d]", i)
		switch {
		case c.Metric == "":
			v.add(p+".metric", "is required (a metric the trainer reports, or %s)", CostMetric)
		case (c.Max == nil) == (c.Min == nil):
			v.add(p, "needs exactly one of max and min (the bound the metric must keep within)")
		case c.Max != nil && (math.IsNaN(*c.Max) || math.IsInf(*c.Max, 0)):
			v.add(p+".max", "is not a finite number")
		case c.Min != nil && (math.IsNaN(*c.Min) || math.IsInf(*c.Min, 0)):
			v.add(p+".min", "is not a finite number")
		}
	}
}
