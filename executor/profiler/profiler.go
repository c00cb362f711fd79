package profiler

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Config says what to measure, and where.
type Config struct {
	// Experiment gives the trainer (as a run launches it), the search space (the trial measured
	// sits in its middle) and the nodes' GPU count.
	Experiment *spec.Experiment
	Runtime    gang.Runtime
	// Provider, when set, rents the nodes of each measurement (whole nodes of the experiment's
	// GPUs per node) and its start-up is measured too; when nil, each measurement runs on one
	// virtual node of exactly its GPU count on this machine.
	Provider cloud.Provider
	GPUs     []int // the GPU counts to measure
	Iters    int   // iterations per measurement, at least 2
	// TimeScale divides what is measured (a trainer told to sleep TimeScale times its profile).
	TimeScale float64
	// Rounds is how many rounds of gangs are measured per GPU count after the warm-up (default
	// 3); every launch of every round is kept (Point.Startups), so that the profile gives the
	// spread of start-ups, whose slowest ends every stage, and not only their middle.
	Rounds int
	// FirstWave, when above 1 and without a Provider, is how many trials the cold round launches
	// at once on its virtual node, as a job's first wave does (default: one, as the measured
	// rounds), at g GPUs each no more than the cluster's GPUs hold (max_nodes of gpus_per_node):
	// what so many launches at once take to get going is the first-stage lag. With a Provider
	// the cold round fills the rented nodes.
	FirstWave int
	// Measured, when set, is told each GPU count's result as soon as it is measured.
	Measured func(Point)
	// Clock is the measurement's time (default the wall clock); under a clock.Sim the runtime
	// and provider must be its actors too.
	Clock clock.Clock
}

// Point is what one GPU count measured, in spec seconds.
type Point struct {
	GPUs int
	Mean float64 // seconds per iteration
	Std  float64 // their sample standard deviation
	// Startups are what each measured TRAIN run took beyond its iterations, launch by launch
	// over every round; Overheads what the run path took after each trainer exited (its
	// checkpoint saved); Lags how much longer each of the cold round's start-ups took than the
	// measured ones' mean: the first-stage lag. The profile file gives them as empirical
	// distributions.
	Startups, Overheads, Lags []float64
	// Startup and Overhead are the medians of Startups and Overheads, Lag the cold round's mean
	// lag: what the log says of a GPU count.
	Startup, Overhead, Lag float64
	// Contention is how much later each of Queued launches at once started than the one before
	// it (profile.startup_contention), measured when the cold round launched more at once than
	// a measured round (Queued 0 otherwise).
	Contention float64
	Queued     int
}

// Profile is what Run measured.
type Profile struct {
	Points []Point
	// NodeScale and NodeInit are, per node rented on a Provider, its start-up in spec seconds,
	// split where its bill starts (cloud.Node.RunningAt) as the model splits it, so that a plan
	// bills what the cost meter does: NodeScale from asking to running (cluster.scale_latency,
	// not billed), NodeInit from running to when the provider handed it over, ready for trials
	// (cluster.init_latency, billed). They are the cluster's latencies, not the trainer's.
	NodeScale, NodeInit []float64
}

// Run measures every GPU count of cfg in turn.
func Run(ctx context.Context, cfg Config) (*Profile, error) {
	if cfg.Iters < 2 {
		return nil, fmt.Errorf("profile: %d iteration(s) per measurement: need at least 2", cfg.Iters)
	}
	if cfg.TimeScale <= 0 {
		return nil, fmt.Errorf("profile: time scale %v is not above 0", cfg.TimeScale)
	}
	params := typicalParams(cfg.Experiment.SearchSpace)
	clk := clock.Or(cfg.Clock)
	p := &Profile{}
	for _, g := range cfg.GPUs {
		nodes, ready, release, err := rent(ctx, cfg, clk, g)
		if err != nil {
			return nil, fmt.Errorf("profile at %d GPUs: %w", g, err)
		}
		gs := gang.GangSpec{Trial: fmt.Sprintf("profile-%dgpu-%d", g, clk.Now().UnixNano()), Experiment: cfg.Experiment,
			Params: params, TargetIter: cfg.Iters}
		cold := nodes
		if c := cfg.Experiment.Cluster; cfg.Provider == nil && cfg.FirstWave > 1 {
			wave := cfg.FirstWave
			if gpus := c.MaxNodes * c.GPUsPerNode; gpus > 0 {
				wave = max(1, min(wave, gpus/g))
			}
			cold = []cloud.Node{{ID: nodes[0].ID, GPUs: wave * g, Addr: nodes[0].Addr}}
		}
		pt, err := measure(ctx, clk, cfg.Runtime, nodes, cold, gs, g, cfg.TimeScale, cmp.Or(max(cfg.Rounds, 0), 3))
		release()
		if err != nil {
			return nil, fmt.Errorf("profile at %d GPUs: %w", g, err)
		}
		for _, n := range ready {
			p.NodeScale = append(p.NodeScale, n.scale)
			p.NodeInit = append(p.NodeInit, n.init)
		}
		p.Points = append(p.Points, pt)
		if cfg.Measured != nil {
			cfg.Measured(pt)
		}
	}
	return p, nil
}

// nodeStart is one rented node's start-up, in spec seconds.
type nodeStart struct{ scale, init float64 }

// rent gets the nodes of a measurement at g GPUs, how long each took to start, and the function
// that gives them back.
func rent(ctx context.Context, cfg Config, clk clock.Clock, g int) ([]cloud.Node, []nodeStart, func(), error) {
	if cfg.Provider == nil {
		return []cloud.Node{{ID: "profile", GPUs: g, Addr: "127.0.0.1"}}, nil, func() {}, nil
	}
	gpn := max(cfg.Experiment.Cluster.GPUsPerNode, 1)
	start := clk.Now()
	nodes, err := cfg.Provider.Create(ctx, cloud.Request{Count: (g + gpn - 1) / gpn})
	ids := make([]string, len(nodes))
	for i, nd := range nodes {
		ids[i] = nd.ID
	}
	release := func() { cfg.Provider.Delete(context.WithoutCancel(ctx), ids) }
	if err != nil {
		release() // what came up of a partial Create
		return nil, nil, nil, err
	}
	return nodes, splitStart(start, clk.Now(), nodes, cfg.TimeScale), release, nil
}

// splitStart splits the start-up of nodes that a Create asked for at start and handed over at
// ready at each node's RunningAt, in spec seconds. A node's trials start when the Create
// returns, so its init runs until then. A RunningAt outside the Create (unknown, or a LaunchTime
// of before it) is clamped into it.
func splitStart(start, ready time.Time, nodes []cloud.Node, scale float64) []nodeStart {
	out := make([]nodeStart, len(nodes))
	for i, n := range nodes {
		running := n.RunningAt
		if running.Before(start) {
			running = start
		}
		if running.After(ready) {
			running = ready
		}
		out[i] = nodeStart{scale: running.Sub(start).Seconds() / scale, init: ready.Sub(running).Seconds() / scale}
	}
	return out
}

// FirstWave is how many trials a job's first wave launches at once at most: those of its
// brackets' first stages, which start together (Config.FirstWave: as far as the cluster's GPUs
// go). A plan that gives the first stage fewer GPUs launches fewer: the lag measured so is an
// upper bound.
func FirstWave(exp *spec.Experiment) int {
	n := 0
	for _, br := range exp.Algorithm.Brackets() {
		if br.Round == 0 && len(br.Stages) > 0 {
			n += br.Stages[0].Trials
		}
	}
	return max(1, n)
}

// typicalParams is the middle of the search space: a typical trial.
func typicalParams(space map[string]spec.Param) spec.Config {
	params := spec.Config{}
	for name, p := range space {
		switch p.Type {
		case "choice":
			params[name] = p.Values[len(p.Values)/2]
		case "int":
			params[name] = int64((p.Min + p.Max) / 2)
		case "loguniform":
			params[name] = math.Sqrt(p.Min * p.Max)
		default:
			params[name] = (p.Min + p.Max) / 2
		}
	}
	return params
}
