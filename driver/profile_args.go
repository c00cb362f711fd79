package driver

import (
	"strconv"
	"strings"
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
