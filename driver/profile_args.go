package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/spec/starter"
)

// ProfilingOf checks `profile`'s numbers in p and reads its comma-separated --gpus list into
// p.GPUs; firstWaveSet says --first-wave was given. What is wrong matches ErrInput, naming its
// flag.
func ProfilingOf(p Profiling, gpus string, firstWaveSet bool) (Profiling, error) {
	if p.Iters < 2 || p.TimeScale <= 0 {
		return p, inputErr("--iters must be at least 2 and --time-scale above 0")
	}
	p.GPUs = nil
	for _, f := range strings.Split(gpus, ",") {
		g, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || g < 1 {
			return p, inputErr("--gpus: %q is not a GPU count", f)
		}
		p.GPUs = append(p.GPUs, g)
	}
	switch {
	case p.Rounds < 1:
		return p, inputErr("--rounds must be at least 1")
	case firstWaveSet && p.FirstWave < 1:
		return p, inputErr("--first-wave must be at least 1")
	}
	return p, nil
}

// SaveProfile writes the profile measured for exp to out and, where exp had none, names it in
// exp's file (starter.NameProfile: relative to it unless keepAbs; the spec must still parse
// with opts), so that plan and run use it as they are. It says the name the spec now gives, ""
// when it had a profile already.
func SaveProfile(exp *spec.Experiment, out string, prof []byte, keepAbs bool, opts ...spec.Option) (string, error) {
	// The folder the spec names may not exist yet; a write that fails still gives back what
	// was measured, minutes of it, rather than losing it.
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("write profile: %w; what was measured:\n%s", err, prof)
	}
	if err := os.WriteFile(out, prof, 0o644); err != nil {
		return "", fmt.Errorf("write profile: %w; what was measured:\n%s", err, prof)
	}
	if !exp.MissingProfile() {
		return "", nil
	}
	rel, err := starter.NameProfile(exp, out, keepAbs, opts...)
	if err != nil {
		return "", fmt.Errorf("wrote %s, but: %w", out, err)
	}
	return filepath.ToSlash(rel), nil
}
