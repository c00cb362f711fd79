package objective

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A benchmark of several objectives: its true front has the hypervolume it claims and nothing
// sampled beats it; at full fidelity its losses are its finals (up to curves' noise), and low
// fidelity ranks the first loss mostly alike; Value and Final are its first loss.
func TestMultiObjectiveBenchmarks(t *testing.T) {
	truth := map[string][][]float64{}
	z, _ := Lookup("zdt1")
	for i := 0; i <= 4000; i++ {
		truth["zdt1"] = append(truth["zdt1"], z.Multi.Finals(spec.Config{"x1": float64(i) / 4000, "x2": 0.0, "x3": 0.0, "x4": 0.0, "x5": 0.0, "x6": 0.0}))
	}
	cl, _ := Lookup("curves-latency")
	for layers := int64(1); layers <= 4; layers++ {
		truth["curves-latency"] = append(truth["curves-latency"], cl.Multi.Finals(spec.Config{"optimizer": "sgd", "momentum": 0.9,
			"lr": 0.1 * math.Sqrt(256.0/128), "batch": int64(256), "dropout": 0.1 * float64(layers), "layers": layers}))
	}
	for _, name := range MultiFunctions() {
		o, err := Lookup(name)
		if err != nil || o.Multi == nil || !slices.Contains(Names(), name) {
			t.Fatalf("%s: %v, several objectives: %v", name, err, o.Multi != nil)
		}
		if r := o.Multi.Regret(truth[name]); r < -1e-9 || r > 1e-3 {
			t.Errorf("%s: the true front lacks %v of its hypervolume", name, r)
		}
		r := rand.New(rand.NewPCG(5, 6))
		var finals, low [][]float64
		for range 5000 {
			c := spec.SampleConfig(o.Space, r)
			f := o.Multi.Finals(c)
			finals = append(finals, f)
			full := o.Multi.Losses(c, 27, 27)
			for m := range f {
				if math.Abs(full[m]-f[m]) > 0.03 {
					t.Fatalf("%s: %v at full fidelity %v, final %v", name, c, full, f)
				}
			}
			if o.Value(c, 27, 27) != full[0] || o.Final(c) != f[0] || f[0] < o.Optimum-1e-9 {
				t.Fatalf("%s: Value/Final are not the first loss, or it beats the optimum %v", name, o.Optimum)
			}
			low = append(low, o.Multi.Losses(c, 3, 27))
		}
		for m := range o.Multi.Metrics { // each loss ranks pairs at low fidelity mostly as at full
			agree := 0
			for i := 0; i+1 < len(finals); i += 2 {
				if (low[i][m] < low[i+1][m]) == (finals[i][m] < finals[i+1][m]) {
					agree++
				}
			}
			if agree < 1500 {
				t.Errorf("%s: %s ranks %d of 2,500 pairs at low fidelity as at full", name, o.Multi.Metrics[m], agree)
			}
		}
		if got := pareto.Hypervolume(finals, o.Multi.Reference); got > o.Multi.MaxHypervolume+1e-9 {
			t.Errorf("%s: 5,000 random configurations dominate %v, more than the true front's %v", name, got, o.Multi.MaxHypervolume)
		}
		if o.Multi.Regret(finals[:1]) <= o.Multi.Regret(finals) {
			t.Errorf("%s: more configurations did not lower the regret", name)
		}
	}
}
