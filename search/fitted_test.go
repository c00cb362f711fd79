package search

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// A model fitted once draws what Draw draws on the same history from the same generator, for
// every draw sharing it: random ones (start-up, the random share) and proposed ones alike.
func TestFittedDrawsAsDraw(t *testing.T) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: -10, Max: 10}, "k": {Type: "choice", Values: []any{"a", "b", "c"}}}
	opt := tpeOptions(2)
	share := 0.3
	opt.RandomFraction, opt.StartupTrials = &share, 5
	tpe := NewTPE(space, opt)
	r := rand.New(rand.NewPCG(3, 4))
	var history []Observation
	proposed := 0
	for i := range 80 {
		f := tpe.Fit(history)
		if f.Observations() != len(history) {
			t.Fatalf("fitted on %d observations, given %d", f.Observations(), len(history))
		}
		for j := range 3 {
			seed := uint64(100*i + j)
			want := tpe.Draw(i, history, rand.New(rand.NewPCG(seed, 1)))
			got := f.Draw(i, rand.New(rand.NewPCG(seed, 1)))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("draw %d.%d on %d results: fitted %v, Draw %v", i, j, len(history), got, want)
			}
			if f.m != nil && !reflect.DeepEqual(got, spec.SampleConfig(space, skipCoin(seed))) {
				proposed++
			}
		}
		c := tpe.Draw(i, history, r)
		x := c["x"].(float64)
		history = append(history, Observation{Params: c, Budget: 1 + i%2, Loss: (x - 3) * (x - 3)})
	}
	if proposed == 0 {
		t.Fatal("no draw was the model's: only random draws were compared")
	}
}

func skipCoin(seed uint64) *rand.Rand {
	r := rand.New(rand.NewPCG(seed, 1))
	r.Float64()
	return r
}

// Refit: at every new result below exactRefits; past it, once results grew by refitShare.
func TestRefit(t *testing.T) {
	tpe := NewTPE(map[string]spec.Param{"x": {Type: "uniform", Min: 0, Max: 1}}, tpeOptions(1))
	at := func(n int) *Fitted { return &Fitted{t: tpe, n: n} }
	for _, c := range []struct {
		fitted *Fitted
		n      int
		want   bool
	}{
		{nil, 0, true},
		{at(10), 10, false},
		{at(10), 11, true},
		{at(exactRefits - 1), exactRefits, true},
		{at(1024), 1024 + 31, false},
		{at(1024), 1024 + 32, true},
		{at(100_000), 100_000 + 3_124, false},
		{at(100_000), 100_000 + 3_125, true},
	} {
		if got := Refit(c.fitted, c.n); got != c.want {
			n := -1
			if c.fitted != nil {
				n = c.fitted.n
			}
			t.Errorf("Refit(fitted on %d, now %d) = %v, want %v", n, c.n, got, c.want)
		}
	}
}
