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
	for _, name := range Functions() {
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
	for _, name := range Functions() {
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

// digits trains the network for real: a configuration's curve is the same whichever order it
// is asked in, and the same in another instance; training lowers the loss of a sound
// configuration; one that diverges reports the worst loss, never NaN.
func TestDigitsTrains(t *testing.T) {
	a, _ := Lookup("digits")
	b, _ := Lookup("digits")
	c := spec.Config{"lr": 0.05, "momentum": 0.9, "hidden": int64(32), "l2": 1e-5, "batch": int64(64)}
	at3 := a.Value(c, 3, 27)
	at1 := a.Value(c, 1, 27)
	if fresh := b.Value(c, 1, 27); at1 != fresh || b.Value(c, 3, 27) != at3 {
		t.Fatalf("after 1 epoch %v, from a fresh instance %v", at1, fresh)
	}
	if !(at3 < at1 && at3 < 0.5) {
		t.Fatalf("validation loss %v after 1 epoch, %v after 3", at1, at3)
	}
	other := spec.Config{"lr": 0.05, "momentum": 0.9, "hidden": int64(32), "l2": 1e-5, "batch": int64(32)}
	if a.Value(other, 1, 27) == at1 {
		t.Fatal("another configuration reported the same loss")
	}
	wild := spec.Config{"lr": 1.0, "momentum": 0.99, "hidden": int64(64), "l2": 0.1, "batch": int64(32)}
	if v := a.Value(wild, 2, 27); math.IsNaN(v) || v <= at3 {
		t.Fatalf("a diverging configuration reports %v", v)
	}
}
