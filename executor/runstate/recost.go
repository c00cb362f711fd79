package runstate

import (
	"errors"
	"fmt"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Recost is what another plan of the run's job (the static baseline its plan was weighed
// against) would have taken and cost on the latencies the run observed: the model updated with
// every observation the run journaled until now, each weighed alike (sim.Model.Posterior), the
// plan simulated whole with the spec's samples and seed; the means. p is the run's, events its
// journal. So the realized cost of the elastic plan is set against a static one on the same
// footing, and a profile that was wrong is not called elasticity.
func Recost(p Plan, events []journal.Event, now time.Time, alloc sim.Alloc) (Measured, error) {
	s, err := fold(p, events)
	if err != nil {
		return Measured{}, fmt.Errorf("re-cost: %w", err)
	}
	return s.Recost(now, alloc)
}

// Recost is Recost of the run s folded: for a reader that folds the journal as it reads it.
func (s *State) Recost(now time.Time, alloc sim.Alloc) (Measured, error) {
	p := s.origin
	if s.ASHA != nil {
		return Measured{}, errors.New("re-cost: an ASHA run's schedule is not stages")
	}
	model := s.Model.Posterior(s.SimEvidence(func(EvidenceKey) float64 { return 1 }, now))
	if err := model.Check(s.Brackets, alloc); err != nil {
		return Measured{}, fmt.Errorf("re-cost: %w", err)
	}
	samples := p.Experiment.Planner.Samples
	if samples <= 0 {
		samples = 100
	}
	o := sim.New(model, s.Brackets, samples, p.Experiment.Seed).Evaluate(alloc)
	return Measured{JCT: sim.Summarize(o.JCT).Mean, Cost: sim.Summarize(o.Cost).Mean}, nil
}
