package profiler

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Write writes the profile in the format of a spec's profile file (profile: {file: ...}): the
// notes, the seconds per iteration at each GPU count, the start-up, the launch overhead and the
// first-stage lag each as the empirical distribution of every launch the GPU counts measured
// (the last two left out when all 0, their default), and the node start-up, when measured, as comments
// (it belongs to the cluster, not to the profile): one line per cluster field, its value ready
// to paste.
func (p *Profile) Write(w io.Writer, notes string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "notes: %s\niter_latency:\n", notes)
	var startups, overheads, lags []float64
	for _, pt := range p.Points {
		fmt.Fprintf(&b, "  %d: {mean: %.6g, std: %.6g}\n", pt.GPUs, pt.Mean, pt.Std)
		startups, overheads, lags = append(startups, orOne(pt.Startups, pt.Startup)...), append(overheads, orOne(pt.Overheads, pt.Overhead)...), append(lags, orOne(pt.Lags, pt.Lag)...)
	}
	fmt.Fprintf(&b, "startup_latency: {dist: empirical, samples: [%s]}\n", Seconds(startups))
	for _, d := range []struct {
		field string
		xs    []float64
	}{{"launch_overhead", overheads}, {"first_stage_lag", lags}} {
		if slices.ContainsFunc(d.xs, func(x float64) bool { return x > 0 }) {
			fmt.Fprintf(&b, "%s: {dist: empirical, samples: [%s]}\n", d.field, Seconds(d.xs))
		}
	}
	if c := p.contention(); c != "" {
		fmt.Fprintf(&b, "startup_contention: {%s}  # by GPUs a launch: each of several at once starts this much after the one before it\n", c)
	}
	if len(p.NodeScale) > 0 {
		fmt.Fprintf(&b, "# node start-up measured, for the cluster (the cost meter bills a node from running):\n")
		fmt.Fprintf(&b, "# %s: {dist: empirical, samples: [%s]}  # request to running, not billed\n", ScaleLatencyField, Seconds(p.NodeScale))
		fmt.Fprintf(&b, "# %s: {dist: empirical, samples: [%s]}  # running to ready for trials, billed\n", InitLatencyField, Seconds(p.NodeInit))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// contention is the points' measured contentions by GPU count ("2: 0.4200s, 4: 0.8100s"), or ""
// when none measured any above 0. They are not pooled: a launch starts a worker a GPU, and a wide
// launch queues longer than a narrow one (the model interpolates between the counts).
func (p *Profile) contention() string {
	var by []string
	some := false
	for _, pt := range p.Points {
		if pt.Queued > 0 {
			by, some = append(by, fmt.Sprintf("%d: %.4fs", pt.GPUs, pt.Contention)), some || pt.Contention > 0
		}
	}
	if !some {
		return ""
	}
	return strings.Join(by, ", ")
}

// The cluster fields that the node start-up comments of a profile file are for.
const (
	ScaleLatencyField = "cluster.scale_latency"
	InitLatencyField  = "cluster.init_latency"
)

// Seconds lists seconds with millisecond digits: "1.250, 0.300".
func Seconds(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(s, ", ")
}

// orOne is a point's launches, or its one summary where it carries none (a point made by hand).
func orOne(xs []float64, x float64) []float64 {
	if len(xs) > 0 {
		return xs
	}
	return []float64{x}
}
