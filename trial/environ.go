package trial

import "strings"

// inheritedVars are the variables of the launcher's environment a trainer inherits: what a
// shell, Python and CUDA/PyTorch need to find themselves and the GPUs, and nothing that holds a
// credential. Everything else (the driver's or server's AWS keys, PGPASSWORD, tokens) stays
// behind; a trainer that needs more declares it in trainer.env.
var inheritedVars = map[string]bool{
	"PATH": true, "HOME": true, "TMPDIR": true, "TZ": true, "LANG": true, "LANGUAGE": true,
	"USER": true, "LOGNAME": true, "SHELL": true, "TERM": true,
	"LD_LIBRARY_PATH": true, "PYTHONPATH": true, "PYTHONHOME": true, "PYTHONUNBUFFERED": true,
	"VIRTUAL_ENV": true, "CONDA_PREFIX": true, "CONDA_DEFAULT_ENV": true,
	"CUDA_HOME": true, "CUDA_PATH": true, "NVIDIA_VISIBLE_DEVICES": true, "NVIDIA_DRIVER_CAPABILITIES": true,
	"OMP_NUM_THREADS": true, "MKL_NUM_THREADS": true,
	// The contract's own (Env.Vars), which a remote worker's task carries for its trainer.
	"CUDA_VISIBLE_DEVICES": true, "RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "MASTER_ADDR": true, "MASTER_PORT": true,
}

// TrainerEnvVar names, comma-separated, the variables of a remote worker's environment that came
// from trainer.env: its trainer inherits them too.
const TrainerEnvVar = "RB_TRAINER_ENV"

// inheritedPrefixes name families of variables inherited whole: the locale's (LC_ALL, LC_CTYPE,
// ...), NCCL's tuning (NCCL_SOCKET_IFNAME, ...) and rubberband's own (RB_*, which carry no
// secret).
var inheritedPrefixes = []string{"LC_", "NCCL_", "RB_"}

// InheritedEnv is the part of environ (KEY=VALUE entries, os.Environ's form) that a trainer
// inherits from the process that starts it: the allowlist above, in environ's order. Every
// launcher of trainers (the process runtime, the remote worker wrapper) starts from it, never
// from its own whole environment. The variables TrainerEnvVar lists are inherited too.
func InheritedEnv(environ []string) []string {
	declared := map[string]bool{}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, TrainerEnvVar+"="); ok {
			for _, k := range strings.Split(v, ",") {
				declared[k] = true
			}
		}
	}
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && (inherited(k) || declared[k]) {
			out = append(out, kv)
		}
	}
	return out
}

func inherited(key string) bool {
	if inheritedVars[key] {
		return true
	}
	for _, p := range inheritedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
