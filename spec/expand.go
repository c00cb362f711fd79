package spec

import (
	"fmt"
	"math"
	"slices"
)

// Stage is one rung of a bracket: Trials trials each train Iters more iterations, from
// iteration StartIter to StartIter+Iters, then a sync keeps the best of them for the next stage.
type Stage struct {
	Trials    int `json:"trials"`
	Iters     int `json:"iters"`
	StartIter int `json:"start_iter"`
}

// EndIter is the iteration every trial of the stage has reached at its sync.
func (s Stage) EndIter() int { return s.StartIter + s.Iters }

// Bracket is one SHA run: a sequence of stages with a sync between each.
type Bracket struct {
	// Name is "sha", "stages", or "hyperband-s4" for Hyperband's bracket s=4 ("r2-hyperband-s4"
	// in the second round).
	Name   string  `json:"name"`
	Stages []Stage `json:"stages"`
	// Round is the Hyperband round the bracket belongs to, from 0: it starts once every bracket
	// of the round before has ended.
	Round int `json:"round,omitempty"`
}

// Trials is how many configurations the bracket samples.
func (b Bracket) Trials() int { return b.Stages[0].Trials }

// Brackets expands the algorithm into brackets of stages. It assumes a validated algorithm. For
// ASHA they are its synchronous counterpart (ASHA.Synchronous), which only planning uses.
func (a Algorithm) Brackets() []Bracket {
	switch {
	case a.SHA != nil:
		return []Bracket{{Name: "sha", Stages: ExpandSHA(a.SHA.Trials, a.SHA.MinIters, a.SHA.MaxIters, a.SHA.Eta)}}
	case a.ASHA != nil:
		return a.ASHA.Synchronous()
	case a.Hyperband != nil:
		round := ExpandHyperband(a.Hyperband.MinIters, a.Hyperband.MaxIters, a.Hyperband.Eta)
		brackets := slices.Clone(round)
		for r := 1; r < a.Hyperband.Rounds; r++ {
			for _, b := range round {
				b.Name, b.Round = fmt.Sprintf("r%d-%s", r+1, b.Name), r
				brackets = append(brackets, b)
			}
		}
		return brackets
	default:
		stages := make([]Stage, len(a.Stages))
		start := 0
		for i, s := range a.Stages {
			stages[i] = Stage{Trials: s.Trials, Iters: s.Iters, StartIter: start}
			start += s.Iters
		}
		return []Bracket{{Name: "stages", Stages: stages}}
	}
}

// ExpandSHA applies the design's rule: stage k keeps floor(n/eta^k) trials and adds r*eta^k
// iterations; the stage after which no trial would be left, or whose budget reaches R, is the
// last, and it trains its trials up to R. SHA(32, 1, 50, 3) gives 32, 10, 3, 1 trials training
// 1, 3, 9, 37 iterations (RubberBand's Table 3).
func ExpandSHA(n, r, R, eta int) []Stage {
	var stages []Stage
	trials, add, done := n, r, 0
	for {
		next := trials / eta // floor(floor(n/eta^k)/eta) = floor(n/eta^(k+1))
		last := next == 0 || done+add >= R
		if last {
			add = R - done
		}
		stages = append(stages, Stage{Trials: trials, Iters: add, StartIter: done})
		if last || add <= 0 {
			return stages
		}
		done += add
		trials = next
		add = mulSat(add, eta)
	}
}

// ExpandHyperband gives Li et al.'s brackets: s_max = floor(log_eta(R/r)); bracket s, from s_max
// down to 0, is SHA(ceil((s_max+1)/(s+1) * eta^s), R*eta^-s, R, eta). For r=1, R=81, eta=3 the
// brackets hold 81, 34, 15, 8 and 5 trials.
func ExpandHyperband(r, R, eta int) []Bracket {
	sMax := 0
	for mulSat(r, powSat(eta, sMax+1)) <= R {
		sMax++
	}
	var brackets []Bracket
	for s := sMax; s >= 0; s-- {
		es := powSat(eta, s)
		n := int(math.Ceil(float64(sMax+1) * float64(es) / float64(s+1)))
		rs := max(R/es, 1)
		brackets = append(brackets, Bracket{Name: fmt.Sprintf("hyperband-s%d", s), Stages: ExpandSHA(n, rs, R, eta)})
	}
	return brackets
}

// powSat is b^k, saturating at MaxInt32 so that large exponents cannot overflow.
func powSat(b, k int) int {
	p := 1
	for range k {
		p = mulSat(p, b)
	}
	return p
}

func mulSat(a, b int) int {
	if a != 0 && b > math.MaxInt32/a {
		return math.MaxInt32
	}
	return a * b
}
