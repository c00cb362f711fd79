package driver

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// profile's numbers are checked in its flags' order, and --gpus is read as counts.
func TestProfilingOf(t *testing.T) {
	t.Parallel()
	good := Profiling{Iters: 5, Rounds: 3, TimeScale: 1}
	p, err := ProfilingOf(good, "1, 2,4", false)
	if err != nil || !slices.Equal(p.GPUs, []int{1, 2, 4}) {
		t.Fatalf("good flags: %v, %v", p.GPUs, err)
	}
	for _, tc := range []struct {
		p         Profiling
		gpus      string
		firstWave bool
		want      string
	}{
		{Profiling{Iters: 1, Rounds: 3, TimeScale: 1}, "1", false, "--iters must be at least 2"},
		{Profiling{Iters: 5, Rounds: 3, TimeScale: 0}, "1", false, "--iters must be at least 2 and --time-scale"},
		{good, "1,0", false, `--gpus: "0" is not a GPU count`},
		{good, "1,two", false, `--gpus: "two"`},
		{Profiling{Iters: 5, Rounds: 0, TimeScale: 1}, "1", false, "--rounds must be at least 1"},
		{good, "1", true, "--first-wave must be at least 1"},
	} {
		_, err := ProfilingOf(tc.p, tc.gpus, tc.firstWave)
		if !errors.Is(err, ErrInput) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v %q %v: %v, want ErrInput %q", tc.p, tc.gpus, tc.firstWave, err, tc.want)
		}
	}
}

// A spec that names its profile already keeps it: the profile is written and nothing is named.
func TestSaveProfileKeepsANamedOne(t *testing.T) {
	t.Parallel()
	exp, err := spec.Load("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p.yaml")
	if rel, err := SaveProfile(exp, out, []byte("x"), false); err != nil || rel != "" {
		t.Fatalf("SaveProfile: %q, %v", rel, err)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "x" {
		t.Fatalf("the profile written: %q, %v", data, err)
	}
	if _, err := SaveProfile(exp, filepath.Join(out, "under-a-file"), nil, false); err == nil || !strings.HasPrefix(err.Error(), "write profile: ") {
		t.Fatalf("a profile that cannot be written: %v", err)
	}
}
