package profiler

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// gangRun is one measured launch: when rank 0 reported, and when the gang was seen to exit.
type gangRun struct {
	start  time.Time // its round's start, when fit is given runs of several rounds
	at     []time.Time
	exited time.Time
	err    error
}

// measure runs the trial of gs on g GPUs spread over nodes (whole nodes first), as many gangs
// side by side as fit on the first node, as a stage runs them (launching several at once costs
// more than launching one). The first round on fresh nodes is a warm-up (a node's first jobs pay
// one-time costs later launches do not), not measured; the next rounds are. Iteration times are
// pooled over the rounds; the start-up is the median of the rounds' start-ups.
func measure(ctx context.Context, rt executor.Runtime, nodes []cloud.Node, gs executor.GangSpec, g int, scale float64, rounds int) (Point, error) {
	byID := make(map[string]cloud.Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	slots := executor.SpreadSlots(nodes, g)
	side := max(1, nodes[0].GPUs/g)
	round := func(tag string) (time.Time, []gangRun) {
		runs := make(chan gangRun, side)
		start := time.Now()
		for k := range side {
			one := gs
			one.Trial = fmt.Sprintf("%s-%s%d", gs.Trial, tag, k)
			gang := executor.BuildGang(one, slots, byID)
			go func() { runs <- launch(ctx, rt, gang) }()
		}
		out := make([]gangRun, 0, side)
		for range side {
			out = append(out, <-runs)
		}
		return start, out
	}
	if _, warm := round("warmup-"); firstErr(warm) != nil {
		return Point{}, firstErr(warm)
	}
	var all []gangRun
	var startups []float64
	for i := range rounds {
		start, runs := round(fmt.Sprintf("r%d-", i))
		if err := firstErr(runs); err != nil {
			return Point{}, err
		}
		pt, err := fit(start, runs, scale)
		if err != nil {
			return Point{}, err
		}
		startups = append(startups, pt.Startup)
		for _, r := range runs {
			r.start = start
			all = append(all, r)
		}
	}
	pt, err := fit(time.Time{}, all, scale)
	pt.GPUs, pt.Startup = g, median(startups)
	return pt, err
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// launch runs one gang to its end and collects the times of its reports.
func launch(ctx context.Context, rt executor.Runtime, g executor.Gang) gangRun {
	h, err := rt.Launch(ctx, g)
	if err != nil {
		return gangRun{err: err}
	}
	var r gangRun
	for rep := range h.Reports() {
		r.at = append(r.at, rep.At)
	}
	<-h.Exited()
	r.exited = time.Now()
	r.err = h.Wait()
	return r
}

func firstErr(runs []gangRun) error {
	for _, r := range runs {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// fit turns a round of runs launched at start into a profile point, in spec seconds (wall
// seconds divided by scale): the mean and sample standard deviation of every interval between
// two reports of a run, and the start-up, averaged over the runs.
//
// A TRAIN run costs startup + iterations. What it takes beyond its iterations, as the runtime has
// it, is the time before the first report less one iteration, plus from the last report to the
// gang's exit being seen. (Subtracting n mean iterations from the whole run instead would carry
// all n iterations' noise into the estimate.)
func fit(start time.Time, runs []gangRun, scale float64) (Point, error) {
	var d []float64
	for _, r := range runs {
		if len(r.at) < 2 {
			return Point{}, fmt.Errorf("the trainer reported %d time(s); need one per iteration", len(r.at))
		}
		for i := 1; i < len(r.at); i++ {
			d = append(d, r.at[i].Sub(r.at[i-1]).Seconds()/scale)
		}
	}
	var pt Point
	for _, x := range d {
		pt.Mean += x
	}
	pt.Mean /= float64(len(d))
	for _, x := range d {
		pt.Std += (x - pt.Mean) * (x - pt.Mean)
	}
	if len(d) > 1 {
		pt.Std = math.Sqrt(pt.Std / float64(len(d)-1))
	}
	for _, r := range runs {
		from := start
		if !r.start.IsZero() {
			from = r.start
		}
		head := r.at[0].Sub(from).Seconds()/scale - pt.Mean
		tail := r.exited.Sub(r.at[len(r.at)-1]).Seconds() / scale
		pt.Startup += max(0, head+tail)
	}
	pt.Startup /= float64(len(runs))
	return pt, nil
}
