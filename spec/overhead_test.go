package spec

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// launch_overhead and first_stage_lag are optional distributions: left out, constant 0; a value
// alone is a constant; out of range is a problem with its line; written beside a profile file,
// a problem (they belong in it).
func TestLaunchOverheadAndFirstStageLag(t *testing.T) {
	head := "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"cluster: {gpus_per_node: 2, price_per_hour: 1}\n"
	exp, err := Parse("a.yaml", []byte(head+"profile: {iter_latency: {1: {mean: 1}}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := exp.Profile; !reflect.DeepEqual(p.LaunchOverhead, Dist{Kind: DistConstant}) || !reflect.DeepEqual(p.FirstStageLag, Dist{Kind: DistConstant}) {
		t.Fatalf("defaults: overhead %+v, lag %+v", p.LaunchOverhead, p.FirstStageLag)
	}
	exp, err = Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n  launch_overhead: {value: 5ms}\n  first_stage_lag: {min: 0.5, max: 2s}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := exp.Profile; p.LaunchOverhead.Kind != DistConstant || p.LaunchOverhead.Value != 0.005 || p.FirstStageLag.Kind != DistUniform || p.FirstStageLag.Max != 2 {
		t.Fatalf("overhead %+v, lag %+v", p.LaunchOverhead, p.FirstStageLag)
	}
	_, err = Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n  launch_overhead: {value: -1}\n  first_stage_lag: {dist: weibull}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "a.yaml:7: profile.launch_overhead.value: -1 s is out of range") ||
		!strings.Contains(err.Error(), `a.yaml:8: profile.first_stage_lag.dist: "weibull" is not a distribution`) {
		t.Fatalf("want both problems with their lines, got %v", err)
	}
	refusedBesideProfileFile(t, head, "first_stage_lag: {value: 1s}")
}

// refusedBesideProfileFile checks that a spec (head, then a profile naming a file) refuses the
// profile field given beside the file: it belongs in it.
func refusedBesideProfileFile(t *testing.T, head, field string) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(dir+"/prof.yaml", []byte("iter_latency: {1: {mean: 1}}\n"), 0o644))
	must(t, os.WriteFile(dir+"/s.yaml", []byte(head+"profile: {file: prof.yaml, "+field+"}\n"), 0o644))
	if _, err := Load(dir + "/s.yaml"); err == nil || !strings.Contains(err.Error(), "either a file or inline") {
		t.Fatalf("%s beside a profile file: %v", field, err)
	}
}

// startup_contention is optional seconds (0 left out), a number or a duration, or such seconds
// by GPU count (linear between the counts and from 0 at 0 GPUs, along the last two beyond them);
// below 0, not a duration or not a GPU count is a problem at its line, with the others at theirs;
// beside a profile file, a problem (it belongs in it).
func TestStartupContention(t *testing.T) {
	head := "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"cluster: {gpus_per_node: 2, price_per_hour: 1}\n"
	for text, want := range map[string][5]float64{ // at 1, 2, 3, 4 and 8 GPUs
		"":                                 {},
		"  startup_contention: 0.02\n":     {0.02, 0.02, 0.02, 0.02, 0.02},
		"  startup_contention: 25ms\n":     {0.025, 0.025, 0.025, 0.025, 0.025},
		"  startup_contention: {2: 0.4}\n": {0.2, 0.4, 0.6, 0.8, 1.6},
		"  startup_contention: {2: 0.4, 4: 800ms}\n": {0.2, 0.4, 0.6, 0.8, 1.6},
		"  startup_contention: {1: 0.3, 2: 0.1}\n":   {0.3, 0.1, 0, 0, 0},
	} {
		exp, err := Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n"+text), nil)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		c := exp.Profile.StartupContention
		for i, g := range []int{1, 2, 3, 4, 8} {
			if math.Abs(c.At(g)-want[i]) > 1e-12 {
				t.Fatalf("%q: %v s at %d GPUs, want %v", text, c.At(g), g, want[i])
			}
		}
	}
	_, err := Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n  startup_contention: {0: 1, 2: -1, x: 1}\n"), nil)
	for _, want := range []string{"a.yaml:7: profile.startup_contention.0: 0 is not a GPU count", "a.yaml:7: profile.startup_contention.2: -1 s is out of range", `a.yaml:7: profile.startup_contention.x: key "x" is not a whole number`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("want %q, got %v", want, err)
		}
	}
	_, err = Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n  startup_contention: -0.5\n  launch_overhead: {value: -1}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "a.yaml:7: profile.startup_contention: -0.5 s is out of range") ||
		!strings.Contains(err.Error(), "a.yaml:8: profile.launch_overhead.value") {
		t.Fatalf("want both problems with their lines, got %v", err)
	}
	if _, err := Parse("a.yaml", []byte(head+"profile:\n  iter_latency: {1: {mean: 1}}\n  startup_contention: soon\n"), nil); err == nil || !strings.Contains(err.Error(), "a.yaml:7: profile.startup_contention") {
		t.Fatalf("not a duration: %v", err)
	}
	refusedBesideProfileFile(t, head, "startup_contention: 1s")
}
