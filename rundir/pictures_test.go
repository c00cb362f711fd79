package rundir

import (
	"os"
	"path/filepath"
	"testing"
)

// A finished run's pictures hold its data: a curve per trial that reported, both schedules, a
// cost per stage predicted and realized; its search's best trial with its curve; and Plot draws
// the five files of `report --plots`.
func TestPicturesOfAFinishedRun(t *testing.T) {
	st, _, _ := finishedRun(t, quickstart(t, 1), nil)
	r, err := Replay(st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Pictures()
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != st.Exp.Name || p.Metric != st.Exp.Objective.Metric || len(p.Curves) != len(LearningCurves(st.Exp, r.Events)) || len(p.Curves) == 0 {
		t.Errorf("name %q metric %q, %d curves", p.Name, p.Metric, len(p.Curves))
	}
	if len(p.Planned.Spans) == 0 || len(p.Realized.Spans) == 0 {
		t.Errorf("schedules: %d planned spans, %d realized", len(p.Planned.Spans), len(p.Realized.Spans))
	}
	if len(p.Stages) == 0 || len(p.PredictedCost) != len(p.Stages) || len(p.RealizedCost) != len(p.Stages) || p.Stages[0] != "sha/1" {
		t.Errorf("stages %v, predicted %v, realized %v", p.Stages, p.PredictedCost, p.RealizedCost)
	}
	f := r.Search.Found()
	if f.Best == nil || f.Best.Trial != r.Search.Best.Trial || len(f.Best.Curve.X) != len(r.Search.Best.Curve) || len(f.Points) != len(r.Search.Points) {
		t.Fatalf("found: %+v", f)
	}
	dir := t.TempDir()
	if err := r.Plot(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"curves.png", "gantt-planned.png", "gantt-realized.png", "cost.png", "search.png"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
