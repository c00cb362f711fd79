package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Every example spec in the repository is valid.
func TestExamplesValidate(t *testing.T) {
	files, _ := filepath.Glob("../../*.yaml")
	more, _ := filepath.Glob("../*.yaml")
	files = append(files, more...)
	if len(files) < 8 {
		t.Fatalf("found only %d example specs", len(files))
	}
	for _, f := range files {
		if _, err := spec.Load(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// A row of the paper table has a cell per planner, and the costs it prints keep the planners'
// order: optimal <= greedy <= static.
func TestTableRow(t *testing.T) {
	for _, s := range settings() {
		if s.label != "Table 2, 30 min" && s.label != "Fig. 12, init 10 s, 90 min" {
			continue
		}
		row, err := run(filepath.Join("..", s.file), s)
		if err != nil {
			t.Fatal(err)
		}
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 7 {
			t.Fatalf("%d cells: %s", len(cells), row)
		}
		cost := func(cell string) float64 {
			m := regexp.MustCompile(`^\$([0-9.]+), `).FindStringSubmatch(cell)
			if m == nil {
				t.Fatalf("cell %q has no cost", cell)
			}
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
		if st, gr, op := cost(cells[1]), cost(cells[3]), cost(cells[4]); op > gr || gr > st {
			t.Fatalf("%s: static %v greedy %v optimal %v", s.label, st, gr, op)
		}
	}
	if _, err := os.Stat("../table2-resnet101.yaml"); err != nil {
		t.Fatal(err)
	}
}

// Table 2 on spot (table2-spot.yaml: 30% of the on-demand price, 10 interruptions per 100
// node-hours, the risk priced in): the greedy plan's expected cost is at most half the best
// on-demand elastic plan's at the same deadline and quantile, and it still meets the deadline.
func TestTable2SpotHalvesTheCost(t *testing.T) {
	plan := func(file string) (planner.Result, *sim.Simulator) {
		exp, err := spec.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		s := sim.New(m, exp.Algorithm.Brackets(), exp.Planner.Samples, exp.Seed)
		p, err := planner.NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
		if err != nil {
			t.Fatal(err)
		}
		res, err := planner.Run(p, spec.PlannerGreedy)
		if err != nil {
			t.Fatal(err)
		}
		return res, s
	}
	onDemand, _ := plan("../table2-resnet101.yaml")
	spot, s := plan("../table2-spot.yaml")
	if s.Model().Spot == nil {
		t.Fatal("the spot spec has no interruption model")
	}
	sr, err := s.Simulate(spot.Best.Alloc)
	if err != nil {
		t.Fatal(err)
	}
	interruptions := 0.0
	for _, st := range sr.Brackets[0].Stages {
		interruptions += st.Interruptions
	}
	if !spot.Feasible || !onDemand.Feasible || spot.Best.Cost > 0.5*onDemand.Best.Cost || interruptions <= 0 {
		t.Fatalf("spot $%.2f in %s (feasible %v, %.3f interruptions expected), on-demand $%.2f in %s (feasible %v)",
			spot.Best.Cost, clock(spot.Best.JCT), spot.Feasible, interruptions, onDemand.Best.Cost, clock(onDemand.Best.JCT), onDemand.Feasible)
	}
	t.Logf("spot $%.2f in %s (%.3f interruptions expected), on-demand $%.2f in %s: %.2f of the cost",
		spot.Best.Cost, clock(spot.Best.JCT), interruptions, onDemand.Best.Cost, clock(onDemand.Best.JCT), spot.Best.Cost/onDemand.Best.Cost)
}
