package spec

import (
	"math"
	"strings"
	"testing"
)

// objectives: lists several metrics, each mode defaulted (max, but min for cost_usd); Objective
// is their first; constraints keep their bounds; objective: alone is Objectives' one entry.
func TestObjectivesAndConstraints(t *testing.T) {
	src := withField("objective: {metric: acc}")
	one, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Objectives) != 1 || one.Objectives[0] != (Objective{"acc", "max"}) || one.MultiObjective() {
		t.Fatalf("objective alone: %+v", one.Objectives)
	}
	src = strings.Replace(src, "objective: {metric: acc}\n", `objectives:
  - {metric: acc}
  - {metric: latency_ms, mode: min}
  - {metric: cost_usd}
constraints:
  - {metric: params_m, max: 50}
  - {metric: acc, min: 0.5}
`, 1)
	e, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Objective{{"acc", "max"}, {"latency_ms", "min"}, {CostMetric, "min"}}
	if len(e.Objectives) != 3 || e.Objectives[0] != want[0] || e.Objectives[1] != want[1] || e.Objectives[2] != want[2] || e.Objective != want[0] {
		t.Fatalf("objectives %+v, objective %+v", e.Objectives, e.Objective)
	}
	if !e.MultiObjective() || len(e.Constraints) != 2 || *e.Constraints[0].Max != 50 || *e.Constraints[1].Min != 0.5 {
		t.Fatalf("constraints %+v", e.Constraints)
	}
	if got := strings.Join(e.Metrics(), " "); got != "acc latency_ms cost_usd params_m" {
		t.Errorf("metrics %q", got)
	}
	for _, c := range []struct {
		c    Constraint
		v    float64
		want float64
	}{{e.Constraints[0], 49, 0}, {e.Constraints[0], 50, 0}, {e.Constraints[0], 52.5, 2.5}, {e.Constraints[1], 0.25, 0.25},
		{e.Constraints[1], math.NaN(), math.Inf(1)}} {
		if got := c.c.Violation(c.v); got != c.want {
			t.Errorf("%+v at %v: violation %v, want %v", c.c, c.v, got, c.want)
		}
	}
}

// Every mistake in objectives and constraints comes out at once, each at its line.
func TestObjectiveProblems(t *testing.T) {
	src := strings.Replace(validBase, "objective: {metric: m}\n", `objectives:
  - {metric: acc, mode: up}
  - {metric: cost_usd, mode: max}
  - {metric: acc}
  - {mode: min}
constraints:
  - {metric: size}
  - {metric: size, max: 1, min: 0}
  - {max: 3}
`, 1)
	_, err := Parse("a.yaml", []byte(src), nil)
	probs := problems(t, err)
	want := []struct {
		line int
		path string
		says string
	}{
		{3, "objectives[0].mode", `"up" is not a mode`},
		{4, "objectives[1].mode", "its mode is min"},
		{5, "objectives[2].metric", "already objective 0"},
		{6, "objectives[3].metric", "is required"},
		{8, "constraints[0]", "exactly one of max and min"},
		{9, "constraints[1]", "exactly one of max and min"},
		{10, "constraints[2].metric", "is required"},
	}
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(probs), len(want), err)
	}
	for i, w := range want {
		if p := probs[i]; p.Line != w.line || p.Path != w.path || !strings.Contains(p.Msg, w.says) {
			t.Errorf("problem %d: %s:%d %s, want line %d %s: ...%s...", i, p.Path, p.Line, p.Msg, w.line, w.path, w.says)
		}
	}

	both := withField("objectives: [{metric: m}]") // beside validBase's objective:
	if _, err := Parse("a.yaml", []byte(both), nil); err == nil || !strings.Contains(err.Error(), "objectives: and objective are both given") {
		t.Errorf("objective and objectives: %v", err)
	}
	empty := strings.Replace(validBase, "objective: {metric: m}\n", "objectives: []\n", 1)
	if _, err := Parse("a.yaml", []byte(empty), nil); err == nil || !strings.Contains(err.Error(), "objectives: is empty") {
		t.Errorf("objectives: []: %v", err)
	}
	many := strings.Replace(validBase, "objective: {metric: m}\n", "objectives: ["+strings.Repeat("{metric: a}, ", MaxObjectives)+"{metric: b}]\n", 1)
	if _, err := Parse("a.yaml", []byte(many), nil); err == nil || !strings.Contains(err.Error(), "at most 8") {
		t.Errorf("too many objectives: %v", err)
	}
	none := strings.Replace(validBase, "objective: {metric: m}\n", "", 1)
	if _, err := Parse("a.yaml", []byte(none), nil); err == nil || !strings.Contains(err.Error(), "objective.metric: is required") {
		t.Errorf("no objective: %v", err)
	}
}

// validate's summary says what ranks the results of several objectives.
func TestSummaryNamesTheObjectives(t *testing.T) {
	src := strings.Replace(validBase, "objective: {metric: m}\n", "objectives: [{metric: acc}, {metric: cost_usd}]\nconstraints: [{metric: size, max: 3}]\n", 1)
	e, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Summary(); !strings.HasSuffix(got, "; Pareto front of acc (max), cost_usd (min) under 1 constraint") {
		t.Errorf("summary %q", got)
	}
}
