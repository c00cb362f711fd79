package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// Metrics is one run's collectors, in a registry of their own.
type Metrics struct {
	reg    *prometheus.Registry
	labels prometheus.Labels

	elapsed, cost              prometheus.Gauge
	predictedJCT, predictedUSD prometheus.Gauge

	mu       sync.Mutex
	snapshot func() *runstate.Snapshot // nil until Follow
}

// New makes the metrics of run runID of an experiment, with the plan's predicted JCT (spec
// seconds) and cost.
func New(runID, experiment string, predictedJCT, predictedCost float64) *Metrics {
	labels := prometheus.Labels{"run": runID, "experiment": experiment}
	reg := prometheus.NewRegistry()
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "rubberband", Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	m := &Metrics{reg: reg, labels: labels,
		elapsed:      gauge("elapsed_seconds", "Spec seconds since the run started (its JCT once it has finished)."),
		cost:         gauge("cost_dollars", "Dollars the run has cost so far (its realized cost once it has finished)."),
		predictedJCT: gauge("predicted_jct_seconds", "The plan's predicted JCT, mean."),
		predictedUSD: gauge("predicted_cost_dollars", "The plan's predicted cost, mean."),
	}
	reg.MustRegister(snapshotCollector{m})
	m.predictedJCT.Set(predictedJCT)
	m.predictedUSD.Set(predictedCost)
	return m
}

// Follow makes the metrics read the run through snapshot (executor.Config.Live hands it over).
func (m *Metrics) Follow(snapshot func() *runstate.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snapshot = snapshot
}

// Progress sets spec time and cost so far.
func (m *Metrics) Progress(s runstate.Status) {
	m.elapsed.Set(s.Elapsed.Seconds())
	m.cost.Set(s.Cost)
}

// Finished sets the realized JCT and cost.
func (m *Metrics) Finished(jct, cost float64) {
	m.elapsed.Set(jct)
	m.cost.Set(cost)
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// snapshotCollector reads the run's snapshot at every scrape.
type snapshotCollector struct{ m *Metrics }

// descriptions of what the snapshot says.
var (
	descNodes   = newDesc("nodes", "Nodes held, by instance type and market.", "instance_type", "market")
	descStage   = newDesc("stage", "The stage each bracket runs, from 1.", "bracket")
	descRunning = newDesc("trials_running", "Trials whose gang runs now.")
	counters    = []struct {
		desc  *prometheus.Desc
		count func(runstate.Counts) int
	}{
		{newDesc("trial_stages_done_total", "Trial-stages that reached their target."), func(c runstate.Counts) int { return c.Done }},
		{newDesc("retries_total", "Failed tries that were relaunched."), func(c runstate.Counts) int { return c.Retries }},
		{newDesc("trials_failed_total", "Trials given up on after their last retry."), func(c runstate.Counts) int { return c.GaveUp }},
		{newDesc("timeouts_total", "Gangs stopped past their time budget."), func(c runstate.Counts) int { return c.Timeouts }},
		{newDesc("nodes_lost_total", "Nodes that went away under the run (crashes, spot interruptions)."), func(c runstate.Counts) int { return c.NodesLost }},
		{newDesc("spot_interruptions_total", "Spot nodes taken away under the run."), func(c runstate.Counts) int { return c.Interruptions }},
		{newDesc("interrupted_tries_total", "Tries that lost their node and were relaunched from their checkpoints."), func(c runstate.Counts) int { return c.InterruptedTries }},
	}
)

// newDesc describes a metric with the run's labels (made const per run by the collector).
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("rubberband_"+name, help, append([]string{"run", "experiment"}, labels...), nil)
}

func (c snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodes
	ch <- descStage
	ch <- descRunning
	for _, k := range counters {
		ch <- k.desc
	}
}

func (c snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	get := c.m.snapshot
	c.m.mu.Unlock()
	if get == nil {
		return
	}
	s := get()
	run, exp := c.m.labels["run"], c.m.labels["experiment"]
	held := map[[2]string]int{}
	for _, n := range s.Held() {
		held[[2]string{n.Node.InstanceType, string(n.Node.Market)}]++
	}
	for _, n := range s.Nodes { // kinds once held read 0, not absent
		if k := [2]string{n.Node.InstanceType, string(n.Node.Market)}; held[k] == 0 {
			held[k] = 0
		}
	}
	keys := make([][2]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(held[k]), run, exp, k[0], k[1])
	}
	for b, k := range s.Current {
		ch <- prometheus.MustNewConstMetric(descStage, prometheus.GaugeValue, float64(k+1), run, exp, strconv.Itoa(b))
	}
	ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(len(s.Open())), run, exp)
	for _, k := range counters {
		ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.count(s.Counts)), run, exp)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
