package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/tabwriter"
)

// OptunaFile is where Optuna's runs of an objective at a budget are kept in dir.
func OptunaFile(dir, objective string, iters int) string {
	return filepath.Join(dir, fmt.Sprintf("optuna-%s-%d.json", objective, iters))
}

// RunOptuna runs scripts/optuna_bench.py (Debian's /usr/bin/python3, which has python3-optuna)
// on an objective at a budget, over seeds, into path; its output goes to w. evaluator is the
// rubberband binary, whose `search-bench objective` computes the benchmarks the script does not
// (digits).
func RunOptuna(ctx context.Context, script, evaluator, objective string, iters, seeds int, path string, w io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", script, "--objective", objective, "--min-iters", "1", "--max-iters", "27",
		"--eta", "3", "--budget-iters", strconv.Itoa(iters), "--seeds", strconv.Itoa(seeds), "--out", path, "--evaluator", evaluator)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("optuna: %s: %w", script, err)
	}
	return nil
}

// OptunaSource is where Optuna's trajectories come from: the files in Dir, written when missing
// by Script (scripts/optuna_bench.py; none: Optuna is left out) over Seeds seeds, Evaluator
// the rubberband binary it asks for the benchmarks it does not compute.
type OptunaSource struct {
	Dir, Script, Evaluator string
	Seeds                  int
}

// Trajectories reads Optuna's runs of an objective at a budget, running the script first when
// the file is missing; log hears what it does, and that Optuna is left out when there is no
// script.
func (o OptunaSource) Trajectories(ctx context.Context, objective string, iters int, log io.Writer) ([]Trajectory, error) {
	path := OptunaFile(o.Dir, objective, iters)
	if _, err := os.Stat(path); err != nil {
		if o.Script == "" {
			fmt.Fprintf(log, "rubberband: no %s (--optuna-script runs scripts/optuna_bench.py): Optuna left out\n", path)
			return nil, nil
		}
		fmt.Fprintf(log, "optuna: %s, %d iterations a run, %d seeds\n", objective, iters, o.Seeds)
		if err := RunOptuna(ctx, o.Script, o.Evaluator, objective, iters, o.Seeds, path, log); err != nil {
			return nil, err
		}
	}
	return ReadOptuna(path, objective, iters)
}

// ReadOptuna reads Optuna's runs from path, which must hold objective at iters iterations.
func ReadOptuna(path, objective string, iters int) ([]Trajectory, error) {
	obj, budget, trajs, err := LoadOptuna(path)
	if err != nil {
		return nil, err
	}
	if obj != objective || budget != iters {
		return nil, fmt.Errorf("optuna: %s holds %s at %d iterations, not %s at %d", path, obj, budget, objective, iters)
	}
	return trajs, nil
}

// LoadOptuna reads what scripts/optuna_bench.py wrote: one run per seed, each a trajectory of
// [iterations spent, regret] (no dollars: Optuna knows none).
func LoadOptuna(path string) (objectiveName string, budget int, trajs []Trajectory, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, nil, err
	}
	var f struct {
		Objective string `json:"objective"`
		Sampler   string `json:"sampler"`
		Budget    int    `json:"budget_iters"`
		Runs      []struct {
			Sampler    string       `json:"sampler"` // when the file holds several
			Seed       int          `json:"seed"`
			Trajectory [][2]float64 `json:"trajectory"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Sampler == "" {
		f.Sampler = "optuna"
	}
	for _, r := range f.Runs {
		t := Trajectory{Sampler: cmp.Or(r.Sampler, f.Sampler), Seed: r.Seed}
		for _, p := range r.Trajectory {
			t.Points = append(t.Points, Point{Iters: p[0], Dollars: math.NaN(), Regret: p[1]})
		}
		trajs = append(trajs, t)
	}
	return f.Objective, f.Budget, trajs, nil
}

// Result is one case's comparison: each sampler's quartiles by budget, and the figures.
type Result struct {
	Case      string    `json:"case"`
	Iters     int       `json:"iters"` // one run's budget
	Seeds     int       `json:"seeds"`
	Summaries []Summary `json:"samplers"`
	// ToReachRandom is, per sampler, the share of the budget after which its median regret is
	// at most random's final median (+Inf: never; JSON null).
	ToReachRandom map[string]*float64 `json:"to_reach_random"`
	// MaxHypervolume, for a benchmark of several objectives, is the true front's hypervolume:
	// regret is then what a run's front lacks of it (0: one objective, regret is loss above the
	// optimum).
	MaxHypervolume float64 `json:"max_hypervolume,omitempty"`
}

// Measure names what the regret is.
func (r Result) Measure() string {
	if r.MaxHypervolume > 0 {
		return "hypervolume regret (the true front's hypervolume minus the front found)"
	}
	return "regret (loss above the optimum)"
}

// Compare summarizes a case's trajectories at n evenly spaced budgets.
func Compare(name string, iters, seeds int, trajs []Trajectory, n int) Result {
	r := Result{Case: name, Iters: iters, Seeds: seeds, Summaries: Summarize(trajs, Budgets(float64(iters), n)), ToReachRandom: map[string]*float64{}}
	var random *Summary
	for i := range r.Summaries {
		if r.Summaries[i].Sampler == "random" {
			random = &r.Summaries[i]
		}
	}
	if random != nil {
		for _, s := range r.Summaries {
			share := s.ToReach(random.FinalMedian()) / float64(iters)
			if !math.IsInf(share, 1) {
				r.ToReachRandom[s.Sampler] = &share
			} else {
				r.ToReachRandom[s.Sampler] = nil
			}
		}
	}
	return r
}

// WriteTable prints a case: median regret [quartiles] at a quarter, half, three quarters and all
// of the budget, and the share of the budget each sampler needs to reach random's final median.
func (r Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s: %d iterations a run, %d seeds; %s: median [q1, q3]\n", r.Case, r.Iters, r.Seeds, r.Measure())
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	hv := ""
	if r.MaxHypervolume > 0 {
		hv = fmt.Sprintf("\thypervolume at the end (of %.4g)", r.MaxHypervolume)
	}
	fmt.Fprintln(tw, "sampler\t25%\t50%\t75%\t100% of the budget"+hv+"\treaches random's final at")
	n := len(r.Summaries[0].Iters)
	for _, s := range r.Summaries {
		fmt.Fprintf(tw, "%s", s.Sampler)
		for _, q := range []int{n/4 - 1, n/2 - 1, 3*n/4 - 1, n - 1} {
			q = max(q, 0)
			fmt.Fprintf(tw, "\t%s [%s, %s]", num(s.P50[q]), num(s.P25[q]), num(s.P75[q]))
		}
		if r.MaxHypervolume > 0 {
			fmt.Fprintf(tw, "\t%s", num(r.MaxHypervolume-s.P50[n-1]))
		}
		reach := "never"
		if share := r.ToReachRandom[s.Sampler]; share != nil {
			reach = fmt.Sprintf("%.0f%% of the budget", 100**share)
		}
		fmt.Fprintf(tw, "\t%s\n", reach)
	}
	tw.Flush()
}

func num(x float64) string {
	if math.IsInf(x, 1) {
		return "-"
	}
	return fmt.Sprintf("%.4g", x)
}
