package profiler

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
)

// gangRun is one measured launch: when rank 0 reported, when the gang was seen to exit, and when
// its checkpoint was saved (Wait returned).
type gangRun struct {
	start  time.Time // its round's start, when fit is given runs of several rounds
	at     []time.Time
	exited time.Time
	saved  time.Time
	err    error
}

// measure runs the trial of gs on g GPUs spread over nodes (whole nodes first), as many gangs
// side by side as fit on the first node, as a stage runs them (launching several at once costs
// more than launching one). The first round, on fresh nodes (cold: as many gangs as fit on them,
// at once), pays one-time costs later launches do not, as a job's first wave does: what its
// start-ups take beyond the measured rounds' is the first-stage lag. The next rounds are
// measured: iteration times pooled over them; the start-up and the run path's overhead of every
// launch kept.
func measure(ctx context.Context, clk clock.Clock, rt gang.Runtime, nodes, cold []cloud.Node, gs gang.GangSpec, g int, scale float64, rounds int) (Point, error) {
	round := func(tag string, nodes []cloud.Node) (time.Time, []gangRun) {
		byID := make(map[string]cloud.Node, len(nodes))
		for _, n := range nodes {
			byID[n.ID] = n
		}
		slots := gang.SpreadSlots(nodes, g)
		side := max(1, nodes[0].GPUs/g)
		runs := clock.NewQueue[gangRun](clk)
		start := clk.Now()
		for k := range side {
			one := gs
			one.Trial = fmt.Sprintf("%s-%s%d", gs.Trial, tag, k)
			gang := gang.BuildGang(one, slots, byID)
			clk.Go("profile gang "+one.Trial, func() { runs.Put(launch(ctx, clk, rt, gang)) })
		}
		out := make([]gangRun, 0, side)
		for range side {
			r, err := runs.Get(context.WithoutCancel(ctx)) // each gang ends, a cancelled one too
			if err != nil {
				r.err = err
			}
			out = append(out, r)
		}
		return start, out
	}
	coldStart, coldRuns := round("warmup-", cold)
	if err := firstErr(coldRuns); err != nil {
		return Point{}, err
	}
	measured := make([][]gangRun, rounds)
	for i := range measured {
		start, runs := round(fmt.Sprintf("r%d-", i), nodes)
		if err := firstErr(runs); err != nil {
			return Point{}, err
		}
		for k := range runs {
			runs[k].start = start
		}
		measured[i] = runs
	}
	for k := range coldRuns {
		coldRuns[k].start = coldStart
	}
	// As many launches at once as the cold round, on nodes now warm: what they take beyond the
	// measured rounds' is contention, what the cold ones take beyond them the first-stage lag.
	var contended []gangRun
	if len(coldRuns) > len(measured[0]) {
		start, runs := round("contended-", cold)
		if err := firstErr(runs); err != nil {
			return Point{}, err
		}
		for k := range runs {
			runs[k].start = start
		}
		contended = runs
	}
	pt, err := summarize(coldRuns, measured, contended, scale)
	pt.GPUs = g
	return pt, err
}

// summarize turns the cold round's runs, the measured rounds' and the contended round's (nil
// when the cold round was no wider than a measured one) into a profile point: the iterations
// pooled over the measured rounds; every measured launch's start-up and overhead (Startups,
// Overheads), a slow round's too, since the slowest launch is what ends a stage; the contention,
// from how much longer the contended round's start-ups took than the measured ones (k launches
// at once queue 0, c, ..., (k-1)c: on average (k-1)c/2 more); every cold launch's lag, what its
// start-up took beyond the warm launches' mean at its width (the contended round's, or the
// measured rounds'), at least 0 (Lags); and for the log, the medians of the first two (Startup,
// Overhead) and the cold round's mean lag. Each run carries its round's start.
func summarize(cold []gangRun, measured [][]gangRun, contended []gangRun, scale float64) (Point, error) {
	var all []gangRun
	for _, runs := range measured {
		all = append(all, runs...)
	}
	pt, err := fit(time.Time{}, all, scale)
	if err != nil {
		return Point{}, err
	}
	// Each launch's start-up is measured through its first iteration, whose own noise (the
	// intervals' variance) it carries: the samples are drawn in to the spread that is the
	// start-ups' own, or a noisy trainer's start-up would take on its iterations' spread, which
	// the model already draws.
	noise := pt.Std * pt.Std
	raw, overheads := launchTimes(time.Time{}, all, pt.Mean, scale)
	pt.Startups, pt.Overheads = deconvolve(raw, noise), overheads
	pt.Startup, pt.Overhead = median(pt.Startups), median(pt.Overheads)
	coldStartups, _ := launchTimes(time.Time{}, cold, pt.Mean, scale)
	base := mean(raw)
	if side := len(measured[0]); len(contended) > side {
		warm, _ := launchTimes(time.Time{}, contended, pt.Mean, scale)
		pt.Contention = 2 * max(0, mean(warm)-base) / float64(len(contended)-side)
		pt.Queued = len(contended)
		base = mean(warm)
	}
	lags := make([]float64, len(coldStartups))
	for i, s := range coldStartups {
		lags[i] = s - base
	}
	pt.Lags = deconvolve(lags, noise)
	pt.Lag = max(0, mean(coldStartups)-base)
	return pt, nil
}

// deconvolve draws samples measured with independent noise of variance noise in towards their
// mean, so that their variance is what is left of theirs without the noise (none, when the
// noise explains it all), and keeps them at least 0: an empirical distribution of what was
// measured through the noise.
func deconvolve(xs []float64, noise float64) []float64 {
	m, v := mean(xs), 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	if len(xs) > 1 {
		v /= float64(len(xs) - 1)
	}
	k := 0.0
	if v > noise {
		k = math.Sqrt((v - noise) / v)
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = max(0, m+k*(x-m))
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
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

// launch runs one gang to its end and collects the times of its reports, as an actor of clk.
func launch(ctx context.Context, clk clock.Clock, rt gang.Runtime, g gang.Gang) gangRun {
	h, err := rt.Launch(ctx, g)
	if err != nil {
		return gangRun{err: err}
	}
	var r gangRun
	for {
		rep, ok, err := clock.Recv(context.WithoutCancel(ctx), clk, h.Reports())
		if err != nil || !ok {
			break
		}
		r.at = append(r.at, rep.At)
	}
	clock.Recv(context.WithoutCancel(ctx), clk, h.Exited())
	r.exited = clk.Now()
	r.err = h.Wait()
	r.saved = clk.Now()
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
// two reports of a run, and the start-up and the overhead, averaged over the runs.
//
// A TRAIN run costs startup + iterations + the run path's overhead. What it takes beyond its
// iterations, as the runtime has it, is the time before the first report less one iteration,
// plus from the last report to the gang's exit being seen. (Subtracting n mean iterations from
// the whole run instead would carry all n iterations' noise into the estimate.) The overhead is
// what follows the exit before the launch is done with: its checkpoint saved.
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
	startups, overheads := launchTimes(start, runs, pt.Mean, scale)
	for i := range startups {
		startups[i] = max(0, startups[i])
	}
	pt.Startup, pt.Overhead = mean(startups), mean(overheads)
	return pt, nil
}

// launchTimes is, run by run, what a TRAIN run took beyond its iterations of meanIter seconds
// (the start-up: before its first report less one iteration, plus after its last report until
// its exit was seen; below 0 when its first iteration was quick) and the run path's overhead
// after it (until its checkpoint was saved), in spec seconds. A run's start is its round's, or start when it carries none.
func launchTimes(start time.Time, runs []gangRun, meanIter, scale float64) (startups, overheads []float64) {
	for _, r := range runs {
		from := start
		if !r.start.IsZero() {
			from = r.start
		}
		head := r.at[0].Sub(from).Seconds()/scale - meanIter
		tail := r.exited.Sub(r.at[len(r.at)-1]).Seconds() / scale
		startups = append(startups, head+tail)
		overhead := 0.0
		if !r.saved.IsZero() {
			overhead = max(0, r.saved.Sub(r.exited).Seconds()/scale)
		}
		overheads = append(overheads, overhead)
	}
	return startups, overheads
}
