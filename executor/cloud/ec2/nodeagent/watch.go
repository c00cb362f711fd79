package nodeagent

import (
	"context"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/checkpoint/open"
)

// WatchFromEnv gives o, when it watches a run (RunID and Watchdog set), the Heartbeat of the
// checkpoint store the environment names (RB_CHECKPOINTS*: open.FromEnv), working in
// DataDir/agent.
func WatchFromEnv(ctx context.Context, o Options) (Options, error) {
	if o.RunID == "" || o.Watchdog <= 0 {
		return o, nil
	}
	work := filepath.Join(o.DataDir, "agent")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return o, err
	}
	store, err := open.FromEnv(ctx, work)
	if err != nil {
		return o, err
	}
	o.Heartbeat = store
	return o, nil
}
