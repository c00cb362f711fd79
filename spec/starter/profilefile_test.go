package starter

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Where profile writes: --out first; the file the spec names (beside the spec); NAME.profile.yaml
// for a spec without one; never over an inline profile or for another instance type.
func TestProfileFile(t *testing.T) {
	dir := t.TempDir()
	base := "name: j\ndeadline: 10m\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"search_space: {lr: {type: uniform, min: 0, max: 1}}\ntrainer: {command: [t]}\ncluster: {gpus_per_node: 1, price_per_hour: 1, max_nodes: 2}\n"
	parse := func(text string) *spec.Experiment {
		t.Helper()
		exp, err := spec.Parse(filepath.Join(dir, "job.yaml"), []byte(text), func(string) ([]byte, error) {
			return []byte("iter_latency: {1: {mean: 1}}\n"), nil
		}, spec.ProfileOptional())
		if err != nil {
			t.Fatal(err)
		}
		return exp
	}
	none := parse(base)
	named := parse(base + "profile: {file: p/prof.yaml}\n")
	inline := parse(base + "profile: {iter_latency: {1: {mean: 1}}}\n")
	for _, tc := range []struct {
		exp        *spec.Experiment
		out, other string
		want       string
		needOut    bool
	}{
		{none, "x.yaml", "", "x.yaml", false},
		{none, "", "", filepath.Join(dir, "job.profile.yaml"), false},
		{named, "", "", filepath.Join(dir, "p/prof.yaml"), false},
		{named, "", "p3.2xlarge", "", true},
		{inline, "", "", "", true},
	} {
		got, err := ProfileFile(tc.exp, tc.out, tc.other)
		if got != tc.want || errors.Is(err, ErrNeedOut) != tc.needOut {
			t.Errorf("out %q other %q: %q, %v; want %q (needs --out: %v)", tc.out, tc.other, got, err, tc.want, tc.needOut)
		}
	}
}
