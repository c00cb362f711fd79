package bench

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// The single-objective run's best and the cost-ranked run's pick are what they say: the pick
// is on the second run's front, at most within above the best's noise-free loss, and cheaper;
// what a configuration costs follows its own iteration time (curves-latency: larger batches
// train an epoch faster), so the cost-ranked front has something to trade.
func TestCostOfAccuracy(t *testing.T) {
	c := Case{Objective: "curves-latency", Algorithm: "hyperband", Rounds: 3}
	seen := 0
	r, err := CostOfAccuracy(context.Background(), c, "tpe", 4, 0.01, false, t.TempDir(), func(done, total int) {
		if seen++; done != seen || total != 4 {
			t.Errorf("progress %d of %d, call %d", done, total, seen)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := objective.Lookup(c.Objective)
	// 27 iterations of 10 s on a GPU at $3.06 an hour, times the configuration's own time.
	perUnit := 27 * 10 * 12.24 / 4 / 3600
	fair := func(ch Chosen) bool {
		want := perUnit * o.IterTime(ch.Params)
		return math.Abs(ch.Dollars-want) < 0.15*want
	}
	picks := 0
	for _, s := range r.Seeds {
		if s.Best.Final != o.Final(s.Best.Params) || !fair(s.Best) || s.FrontLen < 2 {
			t.Fatalf("seed %d: best %+v (final %v, fair cost %v), front of %d", s.Seed, s.Best, o.Final(s.Best.Params), perUnit*o.IterTime(s.Best.Params), s.FrontLen)
		}
		if s.Pick == nil {
			continue
		}
		picks++
		if s.Pick.Final > s.Best.Final+0.01 || s.Pick.Dollars >= s.Best.Dollars || !fair(*s.Pick) {
			t.Fatalf("seed %d: pick %+v against best %+v", s.Seed, *s.Pick, s.Best)
		}
	}
	if picks == 0 {
		t.Fatal("ranking by cost never found a configuration as good and cheaper")
	}
	var out strings.Builder
	r.WriteTable(&out)
	if !strings.Contains(out.String(), "seeds; saved: median") || strings.Count(out.String(), "\n") != len(r.Seeds)+4 {
		t.Fatalf("table:\n%s", out.String())
	}
	// Within 1% of the best's loss: the same runs, a pick only where it is that near.
	rel, err := CostOfAccuracy(context.Background(), c, "tpe", 4, 0.01, true, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range rel.Seeds {
		if !reflect.DeepEqual(s.Best, r.Seeds[i].Best) {
			t.Fatalf("seed %d: another best, %+v against %+v", i, s.Best, r.Seeds[i].Best)
		}
		if s.Pick != nil && (s.Pick.Final > s.Best.Final*1.01 || s.Pick.Dollars >= s.Best.Dollars) {
			t.Fatalf("seed %d: pick %+v against best %+v, within 1%%", i, *s.Pick, s.Best)
		}
	}
}
