// Command table prints, as a Markdown table, the predicted cost and completion time of every
// planner on the paper's evaluation settings (examples/paper/*.yaml), beside what the paper
// reports. Run it from the repository root: go run ./examples/paper/table
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// setting is one row: a spec file, a change to it, and what the paper reports for it.
type setting struct {
	file   string
	label  string
	change func(*spec.Experiment)
	paper  string
}

func deadline(m int) func(*spec.Experiment) {
	return func(e *spec.Experiment) { e.Deadline = spec.Duration(time.Duration(m) * time.Minute) }
}

func stragglers(sigma float64, billing string) func(*spec.Experiment) {
	return func(e *spec.Experiment) {
		base := e.Profile.IterLatency[1].Mean
		for g, d := range e.Profile.IterLatency {
			d.Std = spec.Seconds(sigma * float64(d.Mean) / float64(base))
			e.Profile.IterLatency[g] = d
		}
		e.Cluster.Billing.Model = billing
		if billing == spec.PerFunction {
			e.Cluster.Billing.Minimum = 0
		}
	}
}

func dataPrice(p float64) func(*spec.Experiment) {
	return func(e *spec.Experiment) { e.Cluster.Data.PricePerGB = p }
}

func trials(k int) func(*spec.Experiment) {
	return func(e *spec.Experiment) { e.Algorithm.SHA.Trials = k }
}

func settings() []setting {
	return []setting{
		{"table2-resnet101.yaml", "Table 2, 20 min", deadline(20), "static 19:24 $34.00; naive 14:39 $27.50; RubberBand 18:56 $15.68"},
		{"table2-resnet101.yaml", "Table 2, 30 min", deadline(30), "static 29:09 $17.73; naive 26:25 $19.83; RubberBand 29:14 $14.70"},
		{"table2-resnet101.yaml", "Table 2, 40 min", deadline(40), "static 36:53 $14.99; naive 26:25 $19.83; RubberBand 37:08 $14.68"},
		{"fig9-stragglers.yaml", "Fig. 9, σ=1 s, per-instance", stragglers(1, spec.PerInstance), "per-instance dearer than per-function for both policies"},
		{"fig9-stragglers.yaml", "Fig. 9, σ=1 s, per-function", stragglers(1, spec.PerFunction), ""},
		{"fig9-stragglers.yaml", "Fig. 9, σ=10 s, per-instance", stragglers(10, spec.PerInstance), "an order of magnitude dearer than per-function at large σ"},
		{"fig9-stragglers.yaml", "Fig. 9, σ=10 s, per-function", stragglers(10, spec.PerFunction), ""},
		{"fig10-cifar10.yaml", "Fig. 10, CIFAR-10, $0.16/GB", dataPrice(0.16), "elastic ~1.5x cheaper than static"},
		{"fig10-imagenet.yaml", "Fig. 10, ImageNet, $0.01/GB", dataPrice(0.01), "data dominates; elastic gains little, never worse"},
		{"fig10-imagenet.yaml", "Fig. 10, ImageNet, $0.16/GB", dataPrice(0.16), "data dominates; elastic gains little, never worse"},
		{"fig11-jobsize.yaml", "Fig. 11, 32 trials", trials(32), "elastic cheaper at every size"},
		{"fig11-jobsize.yaml", "Fig. 11, 128 trials", trials(128), "the gap grows with the trial count"},
		{"fig11-jobsize.yaml", "Fig. 11, 256 trials", trials(256), "the gap grows with the trial count"},
		{"fig12-init1s.yaml", "Fig. 12, init 1 s, 90 min", deadline(90), "up to 3.5x cheaper than static"},
		{"fig12-init1s.yaml", "Fig. 12, init 1 s, 160 min", deadline(160), ""},
		{"fig12-init10s.yaml", "Fig. 12, init 10 s, 90 min", deadline(90), "static unchanged; elastic almost 2x dearer than at 1 s"},
		{"fig12-init100s.yaml", "Fig. 12, init 100 s, 90 min", deadline(90), "elastic still an order of magnitude cheaper at tight deadlines"},
		{"fig12-init100s.yaml", "Fig. 12, init 100 s, 160 min", deadline(160), ""},
	}
}

func main() {
	dir := "examples/paper"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	fmt.Println("| setting | static | naive-elastic | greedy | optimal | greedy vs static | the paper |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range settings() {
		row, err := run(filepath.Join(dir, s.file), s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "table:", err)
			os.Exit(1)
		}
		fmt.Println(row)
	}
}

// run plans one setting with every planner on one simulator, so all compare on the same draws.
func run(file string, s setting) (string, error) {
	exp, err := spec.Load(file)
	if err != nil {
		return "", err
	}
	s.change(exp)
	if probs := exp.Validate(); len(probs) > 0 {
		return "", probs
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		return "", err
	}
	p, err := planner.NewProblem(sim.New(m, exp.Algorithm.Brackets(), exp.Planner.Samples, exp.Seed), exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
	if err != nil {
		return "", err
	}
	cells := []string{s.label}
	costs := map[string]float64{}
	for _, name := range spec.PlannerNames() {
		res, err := planner.Run(p, name)
		if err != nil {
			return "", err
		}
		if !res.Feasible {
			cells = append(cells, fmt.Sprintf("infeasible (fastest %s)", clock(res.Best.JCT)))
			continue
		}
		costs[name] = res.Best.Cost
		cells = append(cells, fmt.Sprintf("$%.2f, %s", res.Best.Cost, clock(res.Best.JCT)))
	}
	ratio := "—"
	if st, g := costs[spec.PlannerStatic], costs[spec.PlannerGreedy]; st > 0 && g > 0 {
		ratio = fmt.Sprintf("%.2fx cheaper", st/g)
	}
	cells = append(cells, ratio, s.paper)
	return "| " + strings.Join(cells, " | ") + " |", nil
}

func clock(s float64) string {
	t := int(s + 0.5)
	if t >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", t/3600, t/60%60, t%60)
	}
	return fmt.Sprintf("%d:%02d", t/60, t%60)
}
