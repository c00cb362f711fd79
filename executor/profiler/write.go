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
// first-stage lag each as the empirical distribution of what the GPU counts measured (the last
// two left out when all 0, their default), and the node start-up, when measured, as a comment
// (it belongs to cluster.scale_latency and init_latency, not to the profile).
func (p *Profile) Write(w io.Writer, notes string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "notes: %s\niter_latency:\n", notes)
	startups, overheads, lags := make([]float64, len(p.Points)), make([]float64, len(p.Points)), make([]float64, len(p.Points))
	for i, pt := range p.Points {
		fmt.Fprintf(&b, "  %d: {mean: %.6g, std: %.6g}\n", pt.GPUs, pt.Mean, pt.Std)
		startups[i], overheads[i], lags[i] = pt.Startup, pt.Overhead, pt.Lag
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
	if len(p.NodeStart) > 0 {
		fmt.Fprintf(&b, "# node start-up measured (request to ready): [%s] s; set cluster.scale_latency and init_latency to match\n", Seconds(p.NodeStart))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Seconds lists seconds with millisecond digits: "1.250, 0.300".
func Seconds(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(s, ", ")
}
