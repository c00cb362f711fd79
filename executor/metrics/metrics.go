package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rubberband-hpo/rubberband/executor"
)

// Metrics is one run's collectors, in a registry of their own.
type Metrics struct {
	reg *prometheus.Registry

	nodes                      *prometheus.GaugeVec
	stage                      *prometheus.GaugeVec
	running                    prometheus.Gauge
	done, retries, gaveUp      prometheus.Counter
	timeouts, lost             prometheus.Counter
	interrupted, relaunched    prometheus.Counter
	elapsed, cost              prometheus.Gauge
	predictedJCT, predictedUSD prometheus.Gauge

	mu      sync.Mutex
	held    map[string]prometheus.Labels // node ID -> its labels, while held
	inGangs map[string]bool              // trials whose gang runs
}

// New makes the run's metrics; every series carries the run's ID and experiment.
func New(runID, experiment string, predictedJCT, predictedCost float64) *Metrics {
	labels := prometheus.Labels{"run": runID, "experiment": experiment}
	reg := prometheus.NewRegistry()
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "rubberband", Name: name, Help: help, ConstLabels: labels}
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts(f(name, help)))
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts(f(name, help)))
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{reg: reg, held: map[string]prometheus.Labels{}, inGangs: map[string]bool{},
		nodes:        prometheus.NewGaugeVec(prometheus.GaugeOpts(f("nodes", "Nodes held, by instance type and market.")), []string{"instance_type", "market"}),
		stage:        prometheus.NewGaugeVec(prometheus.GaugeOpts(f("stage", "The stage each bracket runs, from 1.")), []string{"bracket"}),
		running:      gauge("trials_running", "Trials whose gang runs now."),
		done:         counter("trial_stages_done_total", "Trial-stages that reached their target."),
		retries:      counter("retries_total", "Failed tries that were relaunched."),
		gaveUp:       counter("trials_failed_total", "Trials given up on after their last retry."),
		timeouts:     counter("timeouts_total", "Gangs stopped past their time budget."),
		lost:         counter("nodes_lost_total", "Nodes that went away under the run (crashes, spot interruptions)."),
		interrupted:  counter("spot_interruptions_total", "Spot nodes taken away under the run."),
		relaunched:   counter("interrupted_tries_total", "Tries that lost their node and were relaunched from their checkpoints."),
		elapsed:      gauge("elapsed_seconds", "Spec seconds since the run started (its JCT once it has finished)."),
		cost:         gauge("cost_dollars", "Dollars the run has cost so far (its realized cost once it has finished)."),
		predictedJCT: gauge("predicted_jct_seconds", "The plan's predicted JCT, mean."),
		predictedUSD: gauge("predicted_cost_dollars", "The plan's predicted cost, mean."),
	}
	reg.MustRegister(m.nodes, m.stage)
	m.predictedJCT.Set(predictedJCT)
	m.predictedUSD.Set(predictedCost)
	return m
}

// Observe takes one journal event, in journal order.
func (m *Metrics) Observe(e executor.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Ev {
	case executor.EvNodeUp:
		if e.Node != nil {
			l := prometheus.Labels{"instance_type": e.Node.InstanceType, "market": string(e.Node.Market)}
			if _, ok := m.held[e.Node.ID]; !ok {
				m.held[e.Node.ID] = l
				m.nodes.With(l).Inc()
			}
		}
	case executor.EvNodeOff, executor.EvInterrupt:
		for _, id := range e.Nodes {
			if l, ok := m.held[id]; ok {
				delete(m.held, id)
				m.nodes.With(l).Dec()
			}
		}
		if e.Error == "lost" || e.Ev == executor.EvInterrupt {
			m.lost.Add(float64(len(e.Nodes)))
		}
		if e.Ev == executor.EvInterrupt {
			m.interrupted.Add(float64(len(e.Nodes)))
		}
	case executor.EvStage:
		m.stage.WithLabelValues(strconv.Itoa(e.Bracket)).Set(float64(e.Stage + 1))
	case executor.EvLaunch:
		m.setRunning(e.Trial, true)
	case executor.EvDone:
		m.setRunning(e.Trial, false)
		m.done.Inc()
	case executor.EvFail:
		m.setRunning(e.Trial, false)
		switch {
		case e.GaveUp:
			m.gaveUp.Inc()
		case e.Interrupted:
			m.relaunched.Inc()
		default:
			m.retries.Inc()
		}
	case executor.EvTimeout:
		m.timeouts.Inc()
	case executor.EvResume: // the old driver's gangs are gone
		for t := range m.inGangs {
			m.setRunning(t, false)
		}
	}
}

func (m *Metrics) setRunning(trial string, on bool) {
	if m.inGangs[trial] == on {
		return
	}
	if on {
		m.inGangs[trial] = true
		m.running.Inc()
	} else {
		delete(m.inGangs, trial)
		m.running.Dec()
	}
}

// Progress takes the driver's progress report: spec time and cost so far.
func (m *Metrics) Progress(s executor.Status) {
	m.elapsed.Set(s.Elapsed.Seconds())
	m.cost.Set(s.Cost)
}

// Finished records what the run realized.
func (m *Metrics) Finished(jct, cost float64) {
	m.elapsed.Set(jct)
	m.cost.Set(cost)
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
