package spec

import (
	"math"
	"slices"
	"time"
)

// Experiment is a decoded, defaulted spec. Field paths in errors use the yaml names.
type Experiment struct {
	Name     string   `yaml:"name"`
	Deadline Duration `yaml:"deadline"`
	Seed     int64    `yaml:"seed"`
	// Objective is the objective of a single-objective spec, and the first of Objectives
	// otherwise: what a winner means where one number is asked for (progress, fidelity tables).
	Objective Objective `yaml:"objective"`
	// Objectives is every objective, in the spec's order (Objective alone when the spec wrote
	// objective:). Two or more make promotion rank by Pareto dominance.
	Objectives []Objective `yaml:"objectives"`
	// Constraints a configuration must satisfy: feasible ones rank first.
	Constraints []Constraint     `yaml:"constraints"`
	Algorithm   Algorithm        `yaml:"algorithm"`
	SearchSpace map[string]Param `yaml:"search_space"`
	Trainer     Trainer          `yaml:"trainer"`
	Cluster     Cluster          `yaml:"cluster"`
	Profile     Profile          `yaml:"profile"`
	Planner     PlannerOptions   `yaml:"planner"`
	Checkpoints Checkpoints      `yaml:"checkpoints"`
	Budget      Budget           `yaml:"budget"`
	// Sampler chooses how trials' configurations are drawn (sampler.go).
	Sampler Sampler `yaml:"sampler"`

	// File is the path the spec was read from ("" for specs parsed from memory).
	File string `yaml:"-"`
	// lines maps a field path ("cluster.gpus_per_node") to the line it was written on.
	lines map[string]int
	// profileFiles maps a profile's field path ("profile", "cluster.instance_types[1].profile")
	// to the file its lines refer to, when that profile came from a file.
	profileFiles map[string]string
	// gridTrials is the path of a trials count written as "grid", filled in from the grid.
	gridTrials string
	// failed holds the paths whose value is unknown (true): written but not decoded, or left to
	// a catalog entry that does not exist; and every path above one (false).
	failed map[string]bool
}

// Objective names the metric that ranks trials at each sync.
type Objective struct {
	Metric string `yaml:"metric"`
	Mode   string `yaml:"mode"` // max | min
}

// CostMetric is the built-in metric a spec may rank or constrain by without a trainer reporting
// it: the trial's metered dollars up to the iteration its result is for, from the run's own meter
// (the GPU-seconds of each of its tries at its nodes' prices), so that planning and billing agree.
const CostMetric = "cost_usd"

// Constraint bounds a metric: a configuration satisfies it when the metric is at most Max (or at
// least Min). Exactly one bound is given.
type Constraint struct {
	Metric string   `yaml:"metric"`
	Max    *float64 `yaml:"max"`
	Min    *float64 `yaml:"min"`
}

// Violation is how far value lies outside c's bound (0 inside it; +Inf when value is NaN: a
// metric never reported satisfies nothing).
func (c Constraint) Violation(value float64) float64 {
	switch {
	case math.IsNaN(value):
		return math.Inf(1)
	case c.Max != nil:
		return max(value-*c.Max, 0)
	case c.Min != nil:
		return max(*c.Min-value, 0)
	}
	return 0
}

// MultiObjective reports whether results rank by Pareto dominance and feasibility (two or more
// objectives, or any constraint) rather than by the one objective.
func (e *Experiment) MultiObjective() bool { return len(e.Objectives) > 1 || len(e.Constraints) > 0 }

// Metrics is every metric the spec ranks or constrains by, each once, objectives first.
func (e *Experiment) Metrics() []string {
	var out []string
	for _, o := range e.Objectives {
		if !slices.Contains(out, o.Metric) {
			out = append(out, o.Metric)
		}
	}
	for _, c := range e.Constraints {
		if !slices.Contains(out, c.Metric) {
			out = append(out, c.Metric)
		}
	}
	return out
}

// Algorithm is exactly one of SHA, Hyperband or explicit Stages.
type Algorithm struct {
	SHA       *SHA        `yaml:"sha"`
	Hyperband *Hyperband  `yaml:"hyperband"`
	Stages    []StageSpec `yaml:"stages"`
	ASHA      *ASHA       `yaml:"asha"`
}

// SHA is Successive Halving: n trials, r iterations first, R at most, keep 1/eta at each sync.
type SHA struct {
	// Trials is an integer, or "grid" in the spec: the size of sampler grid's grid.
	Trials   int `yaml:"trials"`
	MinIters int `yaml:"min_iters"`
	MaxIters int `yaml:"max_iters"`
	Eta      int `yaml:"eta"`
}

// Hyperband runs several SHA brackets at once (Li et al.).
type Hyperband struct {
	MinIters int `yaml:"min_iters"`
	MaxIters int `yaml:"max_iters"`
	Eta      int `yaml:"eta"`
	// Rounds runs that many Hyperband iterations one after another (default 1): the brackets of
	// a round side by side, each round's once every bracket of the round before has ended, so
	// that an adaptive sampler draws each round from all the results before it (BOHB).
	Rounds int `yaml:"rounds"`
}

// StageSpec is one explicitly given stage: how many trials train how many more iterations.
type StageSpec struct {
	// Trials is an integer, or "grid" in the spec's first stage: the size of sampler grid's grid.
	Trials int `yaml:"trials"`
	Iters  int `yaml:"iters"`
}

// Param is one dimension of the search space.
type Param struct {
	Type   string  `yaml:"type"` // uniform | loguniform | int | choice
	Min    float64 `yaml:"min"`
	Max    float64 `yaml:"max"`
	Values []any   `yaml:"values"`
	// When makes the parameter conditional: it is active only while each named choice parameter
	// is active and holds one of the listed values (space.go). Inactive, it is absent from the
	// trial's configuration.
	When map[string]AnyOf `yaml:"when"`
}

// AnyOf is the values a condition accepts: one scalar, or a list of them.
type AnyOf []any

// Trainer is the program each trial runs: a command, run as a process, or run inside a
// container image (the Nomad docker driver) when an image is given.
type Trainer struct {
	Command []string          `yaml:"command"`
	Image   string            `yaml:"image"`
	Env     map[string]string `yaml:"env"`
	// Resources are what each worker asks a cluster scheduler for, besides its GPUs (which
	// rubberband's own placement accounts for).
	Resources Resources `yaml:"resources"`
	// Timeout bounds one launch (one trial's stage): past it the gang is stopped and retried
	// from its checkpoint. Default: three times the launch's predicted p99.9 duration plus a
	// minute.
	Timeout Duration `yaml:"timeout"`
	// Reuse lets one process of a single-worker trainer serve one trial after another on the
	// same GPU (trial.ReuseVar), so that its start-up is paid once per slot, not once per launch.
	// The process runtime honours it; gangs of several workers and the Nomad runtime start a
	// process per launch whatever it says.
	Reuse bool `yaml:"reuse"`
	// Workdir is the folder the command runs in, on every backend: relative paths in the
	// command resolve there. Default the spec file's folder; a relative value resolves against
	// it (WorkdirFor). Its files travel with the run where the trainer runs elsewhere (package
	// codebundle).
	Workdir string `yaml:"workdir"`
}

// Resources of one worker.
type Resources struct {
	CPUMHz   int `yaml:"cpu_mhz"`   // default 500
	MemoryMB int `yaml:"memory_mb"` // default 512
}

// Cluster describes the instances a plan rents and what they cost.
type Cluster struct {
	InstanceType     string  `yaml:"instance_type"`
	GPUModel         string  `yaml:"gpu_model"`
	GPUsPerNode      int     `yaml:"gpus_per_node"`
	PricePerHour     float64 `yaml:"price_per_hour"`
	SpotPricePerHour float64 `yaml:"spot_price_per_hour"`
	NetworkGbps      float64 `yaml:"network_gbps"`
	Market           string  `yaml:"market"` // on-demand | spot
	Billing          Billing `yaml:"billing"`
	ScaleLatency     Dist    `yaml:"scale_latency"`
	InitLatency      Dist    `yaml:"init_latency"`
	MaxNodes         int     `yaml:"max_nodes"`
	Data             Data    `yaml:"data"`
	// Spot describes the spot market: its price (spot_price_per_hour is the same price under
	// another name), interruptions and what to do when no spot capacity is left.
	Spot Spot `yaml:"spot"`
	// EC2 says where and how to rent instances on EC2 (--backend ec2); nil when not given.
	EC2 *EC2 `yaml:"ec2"`
	// Nomad selects a team's existing Nomad clients (--backend nomad); nil when not given.
	Nomad *NomadPool `yaml:"nomad"`
	// Kubernetes says where on a Kubernetes cluster the run's pods and nodes are (--backend
	// kube); nil when not given.
	Kubernetes *Kubernetes `yaml:"kubernetes"`
	// InstanceTypes are the candidate types a planner may give each stage (instance.go); empty:
	// the cluster's own type only.
	InstanceTypes []InstanceChoice `yaml:"instance_types"`
	// Markets are the markets a planner may give each stage; default: market alone.
	Markets []string `yaml:"markets"`
	// Hedge lets a planner split a spot stage's nodes between the markets (Proteus' reliability
	// tiers): some on demand, for the critical gangs and as room for interrupted ones, the rest
	// on spot. It needs both markets in Markets; default: true when Markets has both.
	Hedge bool `yaml:"hedge"`
}

// Hedges says whether a planner may hedge stages: hedge is on and both markets are offered.
func (c Cluster) Hedges() bool {
	return c.Hedge && slices.Contains(c.Markets, MarketOnDemand) && slices.Contains(c.Markets, MarketSpot)
}

// HourlyPrice is what one node costs per hour in the chosen market.
func (c Cluster) HourlyPrice() float64 {
	if c.Market == MarketSpot {
		return c.SpotPricePerHour
	}
	return c.PricePerHour
}

// Billing models.
const (
	PerInstance    = "per-instance"
	PerFunction    = "per-function"
	MarketOnDemand = "on-demand"
	MarketSpot     = "spot"
)

// Billing says how rented time turns into dollars.
type Billing struct {
	Model     string   `yaml:"model"` // per-instance | per-function
	Increment Duration `yaml:"increment"`
	Minimum   Duration `yaml:"minimum"`
}

// Data is the dataset each new node downloads once.
type Data struct {
	SizeGB     float64 `yaml:"size_gb"`
	PricePerGB float64 `yaml:"price_per_gb"`
}

// Budget caps what a job may cost: plan and run refuse a plan whose predicted mean cost is over
// MaxCostUSD (0: no cap). During a run, a forecast final cost over it makes the driver re-plan
// for it (the deadline gives way), or, with Stop, stop cleanly at the next sync.
type Budget struct {
	MaxCostUSD float64 `yaml:"max_cost_usd"`
	Stop       bool    `yaml:"stop"`
}

// MaxBudget bounds budget.max_cost_usd, in dollars.
const MaxBudget = 10_000_000

// Profile is the model's scaling profile.
type Profile struct {
	// File, when set, names a YAML file (relative to the spec) holding the profile.
	File string `yaml:"file"`
	// IterLatency maps a GPU count to the latency of one iteration of one trial on that many GPUs.
	IterLatency    map[int]Dist `yaml:"iter_latency"`
	StartupLatency Dist         `yaml:"startup_latency"`
	// LaunchOverhead is what each launch costs the run path beyond the trainer's start-up and
	// iterations (restoring and saving its checkpoint, placing and journaling it): small on its
	// own, it is paid by every trial of every stage, and on a loaded machine it grows. Optional
	// (0).
	LaunchOverhead Dist `yaml:"launch_overhead"`
	// FirstStageLag is how much later a job's first stage gets going than its start-ups say: its
	// widest wave of launches all start at once, on fresh nodes, and pay for it once. Optional
	// (0).
	FirstStageLag Dist `yaml:"first_stage_lag"`
	// StartupContention is how much later each of several launches at once starts than the one
	// before it (they queue for the machine: the last of k waits (k-1) times it), in seconds:
	// what six trainers starting together on one card pay that one alone does not. It applies to
	// the trials a stage launches at once (its first wave), each stage on its own. One for every
	// launch, or by the launch's GPU count. Optional (0).
	StartupContention Contention `yaml:"startup_contention"`
	// SlowNodes are persistent stragglers: a share of nodes that run slower for their life.
	SlowNodes SlowNodes `yaml:"slow_nodes"`
	// Notes records where the numbers come from.
	Notes string `yaml:"notes"`
}

// SlowNodes says how many of an instance type's nodes are persistently slow (cloud variance:
// a noisy neighbour, a throttled GPU), and by how much: each node is slow with probability
// Share, and every trial on a slow node takes Factor times as long.
type SlowNodes struct {
	Share  float64 `yaml:"share"`
	Factor float64 `yaml:"factor"`
}

// PlannerOptions choose and tune the planner.
type PlannerOptions struct {
	Name             string  `yaml:"name"`
	Samples          int     `yaml:"samples"`
	DeadlineQuantile float64 `yaml:"deadline_quantile"`
}

// Planner names.
const (
	PlannerStatic       = "static"
	PlannerNaiveElastic = "naive-elastic"
	PlannerGreedy       = "greedy"
	PlannerOptimal      = "optimal"
)

// PlannerNames lists every planner, in the order tables show them.
func PlannerNames() []string {
	return []string{PlannerStatic, PlannerNaiveElastic, PlannerGreedy, PlannerOptimal}
}

// Dist kinds.
const (
	DistConstant  = "constant"
	DistNormal    = "normal"
	DistLogNormal = "lognormal"
	DistUniform   = "uniform"
	DistEmpirical = "empirical"
)

// Dist is a latency distribution; every value is in seconds. A bare number in YAML means
// seconds, a string is a Go duration ("15s", "1m30s").
type Dist struct {
	Kind    string    `yaml:"dist"`
	Value   Seconds   `yaml:"value"`
	Mean    Seconds   `yaml:"mean"`
	Std     Seconds   `yaml:"std"`
	Min     Seconds   `yaml:"min"`
	Max     Seconds   `yaml:"max"`
	Samples []Seconds `yaml:"samples"`
}

// Constant returns a constant distribution of d.
func Constant(d time.Duration) Dist {
	return Dist{Kind: DistConstant, Value: Seconds(d.Seconds())}
}

// Seconds is a latency in seconds, written in YAML as a number of seconds or a Go duration.
type Seconds float64

// Contention is profile.startup_contention: seconds, one for every launch (a number or a
// duration), or by the launches' GPU count (a mapping, as `rubberband profile` writes it: a
// launch starts a worker a GPU, and on the local backend 32 launches of 4 GPUs queued twice as
// long each as 32 of 2).
type Contention struct {
	All    Seconds
	ByGPUs map[int]Seconds
}

// At is the contention of launches of gpus GPUs each: All, or ByGPUs' value at gpus, linear
// between the counts given (and from 0 at 0 GPUs: one count alone is a cost a worker), beyond the
// largest along the last two counts' line, never below 0.
func (c Contention) At(gpus int) float64 {
	if len(c.ByGPUs) == 0 {
		return float64(c.All)
	}
	if s, ok := c.ByGPUs[gpus]; ok {
		return float64(s)
	}
	// The counts either side of gpus (0 below the smallest); beyond the largest, the two largest.
	// One pass, no allocation: the simulator asks at every launch it draws.
	lo, hi, top, next := 0, 0, 0, 0
	for g := range c.ByGPUs {
		if g < gpus && g > lo {
			lo = g
		}
		if g > gpus && (hi == 0 || g < hi) {
			hi = g
		}
		if g > top {
			top, next = g, top
		} else if g > next {
			next = g
		}
	}
	if hi == 0 {
		lo, hi = next, top
	}
	at := func(g int) float64 { return float64(c.ByGPUs[g]) } // 0 at 0
	w := float64(gpus-lo) / float64(hi-lo)
	return max(0, at(lo)+w*(at(hi)-at(lo)))
}

// Duration is a Go duration, written in YAML as a string such as "20m".
type Duration time.Duration

// D converts to time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Seconds is the duration in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

// Line returns the line a field path was written on, or the line of its nearest written
// ancestor, or 0 when nothing of it was written.
func (e *Experiment) Line(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := e.lines[p]; ok {
			return l
		}
	}
	return 0
}

// Has reports whether a field path was written in the spec (as opposed to defaulted).
func (e *Experiment) Has(path string) bool {
	_, ok := e.lines[path]
	return ok
}

// markFailed records that path's value is unknown.
func (e *Experiment) markFailed(path string) {
	e.failed[path] = true
	for p := parentPath(path); p != ""; p = parentPath(p) {
		if _, ok := e.failed[p]; !ok {
			e.failed[p] = false
		}
	}
}

// unknown reports whether path, a field it belongs to, or a part of it has an unknown value:
// any problem found there would only follow from the one already reported.
func (e *Experiment) unknown(path string) bool {
	if _, ok := e.failed[path]; ok {
		return true
	}
	for p := path; p != ""; {
		p = parentPath(p)
		if e.failed[p] {
			return true
		}
	}
	return false
}

func parentPath(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '.' || p[i] == '[' {
			return p[:i]
		}
	}
	return ""
}

// Checkpoints says where trials' checkpoints are kept: a URL, file://DIR (the default: the run's
// state directory) or s3://BUCKET/PREFIX, written alone or as a mapping with S3 options.
// Credentials are never part of the spec: S3 stores read them from the environment or the
// standard AWS chain.
type Checkpoints struct {
	URL string `yaml:"url"`
	// Endpoint is host:port of an S3-compatible server (MinIO); empty means AWS S3.
	Endpoint string `yaml:"endpoint"`
	Insecure bool   `yaml:"insecure"`
	Region   string `yaml:"region"`
}
