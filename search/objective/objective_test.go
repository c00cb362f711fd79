package objective

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Each benchmark's optimum is where the literature puts it, no sampled point beats it, and at
// full fidelity Value is Final (up to the noise of curves).
func TestOptimaHold(t *testing.T) {
	at := map[string]spec.Config{
		"branin":    {"x1": math.Pi, "x2": 2.275},
		"hartmann6": {"x1": 0.20169, "x2": 0.150011, "x3": 0.476874, "x4": 0.275332, "x5": 0.311652, "x6": 0.6573},
		"curves":    {"optimizer": "sgd", "momentum": 0.9, "lr": 0.1 * math.Sqrt(256.0/128), "batch": int64(256), "dropout": 0.4, "layers": int64(4)},
	}
	for _, name := range Names() {
		o, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Final(at[name]); math.Abs(got-o.Optimum) > 1e-5 {
			t.Errorf("%s at its optimum: %v, want %v", name, got, o.Optimum)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			c := spec.SampleConfig(o.Space, r)
			if f := o.Final(c); f < o.Optimum-1e-9 || math.IsNaN(f) {
				t.Fatalf("%s: %v gives %v, below the optimum %v", name, c, f, o.Optimum)
			}
			full := o.Value(c, 27, 27)
			if math.Abs(full-o.Final(c)) > 0.03 { // curves: noise of sd 0.005 at the end
				t.Fatalf("%s: at full fidelity %v, final %v", name, full, o.Final(c))
			}
		}
	}
	if _, err := Lookup("rosenbrock"); err == nil {
		t.Fatal("an unknown benchmark was found")
	}
}

// Low fidelity differs from high fidelity, but ranks configurations alike more often than not:
// the point of multi-fidelity search.
func TestLowFidelityIsInformative(t *testing.T) {
	for _, name := range Names() {
		o, _ := Lookup(name)
		r := rand.New(rand.NewPCG(3, 4))
		agree, differ := 0, 0
		for range 2000 {
			a, b := spec.SampleConfig(o.Space, r), spec.SampleConfig(o.Space, r)
			lowA, lowB := o.Value(a, 3, 27), o.Value(b, 3, 27)
			if lowA != o.Value(a, 27, 27) {
				differ++
			}
			if (lowA < lowB) == (o.Final(a) < o.Final(b)) {
				agree++
			}
		}
		if differ < 1900 || agree < 1200 {
			t.Errorf("%s: low fidelity differs from full in %d of 2000, ranks pairs alike in %d", name, differ, agree)
		}
	}
}
