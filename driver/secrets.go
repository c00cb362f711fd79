package driver

import (
	"os"

	"github.com/rubberband-hpo/rubberband/spec"
)

// storeSecrets are the credentials of the checkpoint store that a trainer image's containers
// get as Nomad Variables (they inherit nothing from their node): this driver's own AWS keys,
// from its environment, for a run of one user's (`rubberband run`). None for a command trainer,
// whose workers use their node's; and none for a server's run (served), whose driver's keys are
// the server's: its containers use their node's role (an instance profile), never those.
func storeSecrets(exp *spec.Experiment, served bool) []string {
	if exp.Trainer.Image == "" || served {
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
