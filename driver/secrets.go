package driver

import (
	"os"

	"github.com/rubberband-hpo/rubberband/spec"
)

// storeSecrets are the credentials of the checkpoint store that a trainer image's containers
// get as Nomad Variables (they inherit nothing from their node): this driver's own AWS keys,
// from its environment. None for a command trainer, whose workers use their node's.
func storeSecrets(exp *spec.Experiment) []string {
	if exp.Trainer.Image == "" {
		return nil
	}
	var out []string
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}
