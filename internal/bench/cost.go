package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// Chosen is a configuration a run ends with: what it reported, its noise-free loss, and what
// training it fully costs (its GPU time an iteration in the run, at the cluster's price, times
// the job's largest iteration count): the price of training it again.
type Chosen struct {
	Trial    string      `json:"trial"`
	Params   spec.Config `json:"params"`
	Reported float64     `json:"reported"`
	Final    float64     `json:"final"`
	Dollars  float64     `json:"dollars"`
}

// CostSeed is one seed of CostOfAccuracy: the single-objective run's best, and the cheapest
// configuration on the front of the run that also ranks by cost_usd whose noise-free loss is at
// most Within above the best's (Within·best's with Relative) and that costs less (nil: none
// does).
type CostSeed struct {
	Seed     int     `json:"seed"`
	Best     Chosen  `json:"best"`
	Pick     *Chosen `json:"pick"`
	FrontLen int     `json:"front"`
}

// CostResult is CostOfAccuracy's answer.
type CostResult struct {
	Case     string     `json:"case"`
	Sampler  string     `json:"sampler"`
	Within   float64    `json:"within"`
	Relative bool       `json:"relative,omitempty"`
	Seeds    []CostSeed `json:"seeds"`
}

// CostOfAccuracy runs a benchmark's job twice per seed, under one plan and budget: ranking by
// its first loss alone, and by that loss and each trial's cost_usd. It answers whether ranking
// by cost finds a configuration as good (noise-free loss at most within above the first run's
// best: 0.01 is a point of accuracy for a loss that is an error rate; with relative, at most
// within times the best's above it) that costs less to train. progress, when set, hears of each
// seed as it ends.
func CostOfAccuracy(ctx context.Context, c Case, sampler string, seeds int, within float64, relative bool, dir string, progress func(done, total int)) (CostResult, error) {
	out := CostResult{Case: c.String(), Sampler: sampler, Within: within, Relative: relative}
	single, cost := c, c
	single.Rank, cost.Rank = RankFirst, RankCost
	p, err := Prepare(ctx, single)
	if err != nil {
		return out, err
	}
	o, _ := objective.Lookup(c.Objective)
	for seed := range seeds {
		var s CostSeed
		s.Seed = seed
		best, _, err := p.chosen(ctx, single, o, sampler, seed, dir)
		if err != nil {
			return out, err
		}
		s.Best = best[0]
		front, _, err := p.chosen(ctx, cost, o, sampler, seed, dir)
		if err != nil {
			return out, err
		}
		s.FrontLen = len(front)
		limit := s.Best.Final + within
		if relative {
			limit = s.Best.Final + within*math.Abs(s.Best.Final)
		}
		for _, f := range front {
			if f.Final <= limit && f.Dollars < s.Best.Dollars && (s.Pick == nil || f.Dollars < s.Pick.Dollars) {
				s.Pick = &f
			}
		}
		out.Seeds = append(out.Seeds, s)
		if progress != nil {
			progress(seed+1, seeds)
		}
	}
	return out, nil
}

// chosen runs c (planned as p) and returns what it ends with: its best, or a multi-objective
// run's Pareto front.
func (p *Prepared) chosen(ctx context.Context, c Case, o objective.Objective, sampler string, seed int, dir string) ([]Chosen, string, error) {
	exp, err := parse(c, sampler, seed)
	if err != nil {
		return nil, "", err
	}
	perGPUSecond := exp.Cluster.PricePerHour / float64(exp.Cluster.GPUsPerNode) / 3600
	brackets := exp.Algorithm.Brackets()
	spent, iters := map[string]float64{}, map[string]float64{}
	observe := func(e journal.Event) {
		if e.Ev == journal.EvDone {
			spent[e.Trial] += e.Seconds * float64(e.GPUs) * perGPUSecond
			iters[e.Trial] += float64(brackets[e.Bracket].Stages[e.Stage].Iters)
		}
	}
	full := float64(maxIters(brackets))
	dollars := func(trial string) float64 { return spent[trial] / iters[trial] * full }
	journalPath := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%d.jsonl", c.Objective, c.Rank, sampler, seed))
	res, err := virtual.Run(ctx, virtual.Config{Experiment: exp, Alloc: p.Alloc, Seed: int64(seed + 1), Journal: journalPath,
		RunID: "bench", Observe: observe, Bench: &o})
	if err != nil {
		return nil, "", fmt.Errorf("bench: %s seed %d: %w", c.Objective, seed, err)
	}
	r := res.Result
	if !r.Finished || r.Best == nil {
		return nil, "", fmt.Errorf("bench: %s seed %d did not finish with a best", c.Objective, seed)
	}
	metric := exp.Objective.Metric
	if len(r.Pareto) == 0 {
		return []Chosen{{Trial: r.Best.Trial, Params: r.Best.Params, Reported: r.Best.Metric, Final: o.Final(r.Best.Params), Dollars: dollars(r.Best.Trial)}}, metric, nil
	}
	var out []Chosen
	for _, m := range r.Pareto {
		out = append(out, Chosen{Trial: m.Trial, Params: m.Params, Reported: m.Metrics[metric], Final: o.Final(m.Params), Dollars: dollars(m.Trial)})
	}
	return out, metric, nil
}

// WriteTable prints each seed's best and pick, and the medians.
func (r CostResult) WriteTable(w io.Writer) {
	within := fmt.Sprintf("%.3g", r.Within)
	if r.Relative {
		within = fmt.Sprintf("%.3g%%", 100*r.Within)
	}
	fmt.Fprintf(w, "%s, %s: ranked by the first loss alone (best), then also by cost_usd (pick: the front's cheapest that costs less,\n"+
		"with a loss at most %s above the best's); losses noise-free, $ what training the configuration fully costs\n", r.Case, r.Sampler, within)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "seed\tbest loss\tbest $\tfront\tpick loss\tpick $\tsaved")
	var saved []float64
	for _, s := range r.Seeds {
		fmt.Fprintf(tw, "%d\t%.4f\t%.2f\t%d", s.Seed, s.Best.Final, s.Best.Dollars, s.FrontLen)
		if s.Pick == nil {
			fmt.Fprintln(tw, "\t-\t-\t-")
			continue
		}
		share := 1 - s.Pick.Dollars/s.Best.Dollars
		saved = append(saved, share)
		fmt.Fprintf(tw, "\t%.4f\t%.2f\t%.0f%%\n", s.Pick.Final, s.Pick.Dollars, 100*share)
	}
	tw.Flush()
	if len(saved) == 0 {
		fmt.Fprintf(w, "found in 0 of %d seeds\n", len(r.Seeds))
		return
	}
	q := quartiles(saved)
	fmt.Fprintf(w, "found in %d of %d seeds; saved: median %.0f%% [q1 %.0f%%, q3 %.0f%%] of the best's training cost\n",
		len(saved), len(r.Seeds), 100*q[1], 100*q[0], 100*q[2])
}

// maxIters is the most iterations any stage trains a trial up to.
func maxIters(brackets []spec.Bracket) int {
	n := 0
	for _, b := range brackets {
		n = max(n, b.Stages[len(b.Stages)-1].EndIter())
	}
	return n
}

// ParseWithin reads --within: a loss difference ("0.01") or a share of the best's loss ("1%").
func ParseWithin(s string) (within float64, relative bool, err error) {
	num, relative := strings.CutSuffix(strings.TrimSpace(s), "%")
	within, err = strconv.ParseFloat(num, 64)
	if err != nil || !(within >= 0) || math.IsInf(within, 0) {
		return 0, false, fmt.Errorf("--within %q: a loss difference (0.01) or a share of the best's loss (1%%), at least 0", s)
	}
	if relative {
		within /= 100
	}
	return within, relative, nil
}
