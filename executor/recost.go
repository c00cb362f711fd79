package executor

import (
	"errors"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/sim"
)

// Recost is what another plan of the run's job (the static baseline its plan was weighed
// against) would have taken and cost on the latencies the run observed: the model updated with
// every observation the run journaled, each weighed alike (sim.Model.Posterior), the plan
// simulated whole with the spec's samples and seed; the means. cfg is the run's, its journal in
// cfg.Past. So the realized cost of the elastic plan is set against a static one on the same
// footing, and a profile that was wrong is not called elasticity.
func Recost(cfg Config, alloc sim.Alloc) (Measured, error) {
	cfg.Log = io.Discard
	x, err := newRun(cfg)
	if err != nil {
		return Measured{}, fmt.Errorf("re-cost: %w", err)
	}
	if x.st.asha != nil {
		return Measured{}, errors.New("re-cost: an ASHA run's schedule is not stages")
	}
	x.mu.Lock()
	model := x.model.Posterior(x.evidence(func(evidenceKey) float64 { return 1 }, x.clk.Now()))
	x.mu.Unlock()
	if err := model.Check(x.st.brackets, alloc); err != nil {
		return Measured{}, fmt.Errorf("re-cost: %w", err)
	}
	samples := cfg.Experiment.Planner.Samples
	if samples <= 0 {
		samples = 100
	}
	o := sim.New(model, x.st.brackets, samples, cfg.Experiment.Seed).Evaluate(alloc)
	return Measured{JCT: sim.Summarize(o.JCT).Mean, Cost: sim.Summarize(o.Cost).Mean}, nil
}
