package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
)

// StageAlloc is what a plan gives one stage: GPUs for its trials and the nodes held meanwhile,
// of an instance type in a market. Nodes is at least the nodes the GPUs need; a static plan holds
// more. An empty Type or Market is the cluster's own (Model.Offers[0]'s). A stage on another type
// or market than the nodes held before it releases them all at the previous SYNC and starts its
// own (SCALE, INIT_INSTANCE, DATA); its trials move through their checkpoints.
type StageAlloc struct {
	GPUs   int    `json:"gpus"`
	Nodes  int    `json:"nodes"`
	Type   string `json:"type,omitempty"`
	Market string `json:"market,omitempty"`
}

// FormatStages writes stages as `simulate --alloc` reads them, bracketed: each stage's GPUs,
// and @TYPE:MARKET when it names a type or market ("[16 8@p3.2xlarge:spot]").
func FormatStages(stages []StageAlloc) string {
	out := make([]string, len(stages))
	for i, sa := range stages {
		out[i] = strconv.Itoa(sa.GPUs)
		if sa.Type != "" || sa.Market != "" {
			out[i] += "@" + sa.Type + ":" + sa.Market
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// Alloc is a plan's allocation: one StageAlloc per stage of each bracket.
type Alloc [][]StageAlloc

// Elastic turns GPU counts per stage into an allocation that holds just the nodes they need, of
// the default offer.
func (m *Model) Elastic(gpus [][]int) Alloc {
	a := make(Alloc, len(gpus))
	for b, stages := range gpus {
		a[b] = make([]StageAlloc, len(stages))
		for k, g := range stages {
			a[b][k] = StageAlloc{GPUs: g, Nodes: m.NodesFor(g)}
		}
	}
	return a
}

// Clone returns a deep copy.
func (a Alloc) Clone() Alloc {
	c := make(Alloc, len(a))
	for b := range a {
		c[b] = append([]StageAlloc(nil), a[b]...)
	}
	return c
}

// PeakNodes bounds the nodes held at once: brackets run concurrently, so it adds up each
// bracket's largest stage. It is exact for one bracket and safe for several; brackets of
// Hyperband rounds run one round after another (PeakNodesByRound).
func (a Alloc) PeakNodes() int {
	return a.PeakNodesByRound(nil)
}

// PeakNodesByRound is PeakNodes where brackets of different rounds never overlap: the largest,
// over rounds, of the sum of their brackets' peaks. brackets nil: one round.
func (a Alloc) PeakNodesByRound(brackets []spec.Bracket) int {
	perRound := map[int]int{}
	peakAll := 0
	for b := range a {
		round := 0
		if b < len(brackets) {
			round = brackets[b].Round
		}
		perRound[round] += a.PeakNodesOf(b)
		peakAll = max(peakAll, perRound[round])
	}
	return peakAll
}

// GPUsPerTrial is what each trial of a stage gets: its share when there are enough GPUs, else 1
// (trials then queue in waves on single-GPU slots).
func GPUsPerTrial(s spec.Stage, a StageAlloc) int {
	if a.GPUs >= s.Trials {
		return a.GPUs / s.Trials
	}
	return 1
}

// Waves is how many rounds of trials a stage runs.
func Waves(s spec.Stage, a StageAlloc) int {
	if a.GPUs >= s.Trials {
		return 1
	}
	return (s.Trials + a.GPUs - 1) / a.GPUs
}

// Check reports the first way an allocation does not fit the brackets and the model.
func (m *Model) Check(brackets []spec.Bracket, a Alloc) error {
	if len(a) != len(brackets) {
		return fmt.Errorf("allocation has %d brackets, the experiment %d", len(a), len(brackets))
	}
	for b, br := range brackets {
		if len(a[b]) != len(br.Stages) {
			return fmt.Errorf("bracket %d: allocation has %d stages, the experiment %d", b+1, len(a[b]), len(br.Stages))
		}
		for k, s := range br.Stages {
			sa := a[b][k]
			where := fmt.Sprintf("bracket %d stage %d (%d trials)", b+1, k+1, s.Trials) // numbered from 1, as people count
			i, ok := m.OfferIndex(sa)
			if !ok {
				return fmt.Errorf("%s: instance type %q in market %q is not one the spec offers", where, sa.Type, sa.Market)
			}
			m := m.Offers[i]
			if sa.GPUs < 1 {
				return fmt.Errorf("%s: %d GPUs (need at least 1)", where, sa.GPUs)
			}
			if sa.Nodes < m.NodesFor(sa.GPUs) {
				return fmt.Errorf("%s: %d GPUs do not fit on %s of %s", where, sa.GPUs, format.Plural(sa.Nodes, "node"), format.Plural(m.GPUsPerNode, "GPU"))
			}
			if sa.GPUs > s.Trials {
				if sa.GPUs%s.Trials != 0 {
					return fmt.Errorf("%s: %d GPUs do not divide evenly among the trials", where, sa.GPUs)
				}
				if g := sa.GPUs / s.Trials; !m.ValidTrialGPUs(g) {
					return fmt.Errorf("%s: %d GPUs per trial is not placeable (powers of two up to %d, or whole nodes, at most %d as profiled)",
						where, g, m.GPUsPerNode, m.MaxGPUsPerTrial())
				}
			}
		}
	}
	if p := a.PeakNodesByRound(brackets); p > m.MaxNodes { // nodes of every type count
		return fmt.Errorf("allocation holds up to %d nodes, above max_nodes %d", p, m.MaxNodes)
	}
	return nil
}
