package nodeagent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/open"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
)

// An agent that watches a run gets the checkpoint store the environment names as its heartbeat;
// one that watches none gets nothing, and nothing is made for it.
func TestWatchFromEnv(t *testing.T) {
	t.Setenv(open.EnvURL, "file://"+t.TempDir())
	data := t.TempDir()
	o, err := nodeagent.WatchFromEnv(context.Background(), nodeagent.Options{DataDir: data, RunID: "r1"})
	if err != nil || o.Heartbeat != nil {
		t.Fatalf("no watchdog: %v, heartbeat %v", err, o.Heartbeat)
	}
	if _, err := os.Stat(filepath.Join(data, "agent")); !os.IsNotExist(err) {
		t.Fatalf("a work folder for no watchdog: %v", err)
	}
	o, err = nodeagent.WatchFromEnv(context.Background(), nodeagent.Options{DataDir: data, RunID: "r1", Watchdog: time.Minute})
	if err != nil || o.Heartbeat == nil {
		t.Fatalf("a watchdog: %v, heartbeat %v", err, o.Heartbeat)
	}
}
