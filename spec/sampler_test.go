package spec

import (
	"fmt"
	"strings"
	"testing"
)

// Every misuse of when, trials: grid and the sampler's options is reported with its line, all
// in one pass.
func TestSamplerAndConditionProblems(t *testing.T) {
	src := `name: x
objective: {metric: m}
algorithm: {sha: {trials: 5, min_iters: 1, max_iters: 4, eta: 2}}
cluster: {gpus_per_node: 2, price_per_hour: 1}
profile: {iter_latency: {1: {mean: 1}}}
sampler: {name: grid, grid_points: 2, candidates: 8}
search_space:
  opt: {type: choice, values: [sgd, adam]}
  lr: {type: loguniform, min: 0.001, max: 1, when: {units: 8}}
  momentum: {type: uniform, min: 0, max: 1, when: {opt: rmsprop}}
  beta: {type: uniform, min: 0, max: 1, when: {ghost: 1}}
  self: {type: choice, values: [a], when: {self: a}}
  units: {type: int, min: 8, max: 64}
`
	_, err := Parse("s.yaml", []byte(src), nil)
	probs := problems(t, err)
	want := []struct {
		line int
		path string
		msg  string
	}{
		{6, "sampler.candidates", "applies to the tpe sampler only"},
		{9, "search_space.lr.when.units", `"units" is a int parameter`},
		{10, "search_space.momentum.when.opt", "rmsprop is not one of opt's values"},
		{11, "search_space.beta.when.ghost", `"ghost" is not a parameter`},
		{12, "search_space.self.when.self", "cannot depend on itself"},
	}
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(probs), len(want), probs)
	}
	for i, w := range want {
		p := probs[i]
		if p.File != "s.yaml" || p.Line != w.line || p.Path != w.path || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("problem %d: %v, want s.yaml:%d: %s: ...%s...", i, p, w.line, w.path, w.msg)
		}
	}
}

// The grid's count is checked against the first stage, and trials: grid takes it: 2 optimizers,
// sgd with 3 momentums, adam alone (momentum is inactive), by 3 learning rates = 12.
func TestTrialsGrid(t *testing.T) {
	space := `search_space:
  opt: {type: choice, values: [sgd, adam]}
  momentum: {type: uniform, min: 0, max: 1, when: {opt: sgd}}
  lr: {type: loguniform, min: 0.001, max: 1}
`
	base := strings.Replace(validBase, "trials: 4", "trials: grid", 1) + "sampler: {name: grid}\n" + space
	e, err := Parse("s.yaml", []byte(base), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Algorithm.SHA.Trials != 12 {
		t.Fatalf("trials: grid gave %d trials, want 12", e.Algorithm.SHA.Trials)
	}
	_, err = Parse("s.yaml", []byte(strings.Replace(validBase, "trials: 4", "trials: grid", 1)+space), nil)
	if probs := problems(t, err); len(probs) != 1 || probs[0].Line != 3 || !strings.Contains(probs[0].Msg, "needs sampler: {name: grid}") {
		t.Fatalf("trials: grid under random: %v", probs)
	}
	_, err = Parse("s.yaml", []byte(strings.Replace(base, "trials: grid", "trials: 10", 1)), nil)
	if probs := problems(t, err); len(probs) != 1 || probs[0].Line != 3 || !strings.Contains(probs[0].Msg, "10 trials, but the grid holds 12 configurations") || !strings.Contains(probs[0].Msg, "trials: 12") {
		t.Fatalf("10 trials on a grid of 12: %v", probs)
	}
	hb := strings.Replace(validBase, "{sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}", "{hyperband: {min_iters: 1, max_iters: 4, eta: 2}}", 1)
	_, err = Parse("s.yaml", []byte(hb+"sampler: {name: grid}\n"+space), nil)
	if probs := problems(t, err); len(probs) != 1 || probs[0].Path != "sampler.name" || !strings.Contains(probs[0].Msg, "Hyperband") {
		t.Fatalf("grid under hyperband: %v", probs)
	}
	stages := strings.Replace(validBase, "{sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}", "{stages: [{trials: grid, iters: 1}, {trials: 2, iters: 2}]}", 1)
	if e, err := Parse("s.yaml", []byte(stages+"sampler: {name: grid}\n"+space), nil); err != nil || e.Algorithm.Stages[0].Trials != 12 {
		t.Fatalf("stages' trials: grid: %v, %+v", err, e.Algorithm.Stages)
	}
}

// A cycle of conditions is refused, naming it; the other parameters are not judged twice.
func TestConditionCycle(t *testing.T) {
	src := validBase + `search_space:
  a: {type: choice, values: [x, y], when: {b: x}}
  b: {type: choice, values: [x, y], when: {c: x}}
  c: {type: choice, values: [x, y], when: {a: y}}
`
	_, err := Parse("s.yaml", []byte(src), nil)
	probs := problems(t, err)
	if len(probs) != 1 || !strings.Contains(probs[0].Msg, "cycle: a -> b -> c -> a") || probs[0].Line != 7 {
		t.Fatalf("%v", probs)
	}
}

// A chain of conditions is fine, and random sampling keeps today's draws for the parameters a
// condition leaves active: the same seed gives the same lr whether or not momentum is conditional.
func TestRandomDrawsSurviveConditions(t *testing.T) {
	plain := map[string]Param{"opt": {Type: "choice", Values: []any{"sgd", "adam"}}, "momentum": {Type: "uniform", Max: 1}, "lr": {Type: "uniform", Max: 1}}
	cond := map[string]Param{"opt": plain["opt"], "momentum": {Type: "uniform", Max: 1, When: map[string]AnyOf{"opt": {"sgd"}}}, "lr": plain["lr"]}
	a := SampleConfigs(plain, 50, NewRand(1, 0))
	b := SampleConfigs(cond, 50, NewRand(1, 0))
	dropped := 0
	for i := range a {
		if a[i]["lr"] != b[i]["lr"] || a[i]["opt"] != b[i]["opt"] {
			t.Fatalf("draw %d: %v and %v differ beyond momentum", i, a[i], b[i])
		}
		_, has := b[i]["momentum"]
		if has != (b[i]["opt"] == "sgd") {
			t.Fatalf("draw %d: %v holds momentum %v under %v", i, b[i], has, b[i]["opt"])
		}
		if !has {
			dropped++
		}
	}
	if dropped == 0 || dropped == 50 {
		t.Fatalf("momentum dropped from %d of 50 draws", dropped)
	}
}

// ASHA's fields: each bad one named with its line, all at once; defaults and rungs.
func TestASHAValidation(t *testing.T) {
	const head = "name: a\nobjective: {metric: loss, mode: min}\ncluster: {gpus_per_node: 1, price_per_hour: 1}\nprofile: {iter_latency: {1: {dist: constant, value: 1}}}\n"
	_, err := Parse("a.yaml", []byte(head+"algorithm:\n  asha: {trials: 0, min_iters: 1, max_iters: 27, eta: 3, brackets: 5}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "a.yaml:6: algorithm.asha.trials: 0 is out of range") ||
		!strings.Contains(err.Error(), "a.yaml:6: algorithm.asha.brackets: 5 is out of range (1 to 4") {
		t.Fatalf("%v", err)
	}
	_, err = Parse("a.yaml", []byte(head+"algorithm:\n  asha: {trials: 9, min_iters: 3, max_iters: 2, eta: 1}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "algorithm.asha.max_iters: 2 is below min_iters 3") || !strings.Contains(err.Error(), "algorithm.asha.eta: 1 is not a reduction factor") {
		t.Fatalf("%v", err)
	}
	exp, err := Parse("a.yaml", []byte(head+"algorithm:\n  asha: {trials: 10, min_iters: 1, max_iters: 50, eta: 3}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := *exp.Algorithm.ASHA
	if a.Brackets != 1 || !exp.Algorithm.IsASHA() || fmt.Sprint(a.Rungs(0)) != "[1 3 9 27 50]" {
		t.Fatalf("%+v rungs %v", a, a.Rungs(0))
	}
	// Its synchronous counterpart keeps floor(n/eta) a rung, 10, 3, 1, the last up to max_iters.
	if b := exp.Algorithm.Brackets(); len(b) != 1 || len(b[0].Stages) != 3 || b[0].Stages[2].Trials != 1 || b[0].Stages[2].EndIter() != 50 {
		t.Fatalf("%+v", b)
	}
}

// tpe fits one density per parameter with one objective and a joint one with several, unless
// the spec says which.
func TestMultivariateDefaultsWithObjectives(t *testing.T) {
	two := "objectives: [{metric: m}, {metric: cost_usd}]"
	for _, c := range []struct {
		objective, sampler string
		want               bool
	}{
		{"objective: {metric: m}", "sampler: {name: tpe}", false},
		{two, "sampler: {name: tpe}", true},
		{two, "sampler: {name: tpe, multivariate: false}", false},
		{"objective: {metric: m}", "sampler: {name: tpe, multivariate: true}", true},
	} {
		e, err := Parse("s.yaml", []byte(strings.Replace(validBase, "objective: {metric: m}", c.objective, 1)+c.sampler+"\n"), nil)
		if err != nil {
			t.Fatalf("%s, %s: %v", c.objective, c.sampler, err)
		}
		if e.Sampler.Multivariate != c.want {
			t.Errorf("%s, %s: multivariate %v", c.objective, c.sampler, e.Sampler.Multivariate)
		}
	}
}
