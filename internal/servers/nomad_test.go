package servers

import (
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// The helper's server and clients run a raw_exec batch job pinned to one node, and clean up.
func TestNomadRunsAPinnedJob(t *testing.T) {
	n := StartNomad(t)
	n.AddClient("node-a", 2)
	n.AddClient("node-b", 4)
	job := nomad.NewBatchJob("hello", "hello", "global", 50)
	job.Datacenters = []string{"*"}
	tg := nomad.NewTaskGroup("w", 1)
	tg.Constrain(nomad.NewConstraint("${meta.rb_node}", "=", "node-b"))
	task := nomad.NewTask("t", "raw_exec").SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "echo hi from $NOMAD_ALLOC_ID"})
	tg.AddTask(task)
	zero := 0
	tg.RestartPolicy = &nomad.RestartPolicy{Attempts: &zero}
	job.AddTaskGroup(tg)
	if _, _, err := n.Client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		allocs, _, _ := n.Client.Jobs().Allocations("hello", false, nil)
		if len(allocs) == 1 && allocs[0].ClientStatus == "complete" {
			node, _, err := n.Client.Nodes().Info(allocs[0].NodeID, nil)
			if err != nil || node.Name != "node-b" {
				t.Fatalf("ran on %v (%v), want node-b", node, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not complete: %+v", allocs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
