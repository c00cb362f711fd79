package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/servers"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// examples/deploy/server.nomad.hcl on two local Nomad clients and a real PostgreSQL: the server's
// allocation is drained from its client mid-run; Nomad places it on the other, which takes the
// lease and finishes the run with the clean run's winner, nothing launched twice.
func TestServerJobMovesOnNomad(t *testing.T) {
	t.Parallel()
	winner := cleanWinner(t)
	pg := servers.StartPostgres(t)
	n := servers.StartNomad(t)
	n.AddClient("a", 0)
	n.AddClient("b", 0)
	root, dir := t.TempDir(), t.TempDir()
	specFile, _ := syntheticSpec(t, dir, "synthetic.yaml") // its trainer's --spec is absolute: the server runs in its allocation's folder
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--db", pg.URL); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--db", pg.URL)
	if code != 0 {
		t.Fatal(errOut)
	}
	token := strings.TrimSpace(out)
	job := exec.Command(n.Bin, "job", "run", "-detach", "-var", "binary="+binary, "-var", "db="+pg.URL, "-var", "root="+root,
		"-var", "backend=local", "-var", "lease=2s", "-var", "time_scale=0.05", "-var", "password_variable=false", "examples/deploy/server.nomad.hcl")
	job.Dir = "../.."
	job.Env = append(os.Environ(), n.Env("")...)
	if b, err := job.CombinedOutput(); err != nil {
		t.Fatalf("nomad job run: %v\n%s", err, b)
	}
	t.Cleanup(func() { stopJob(t, n.Client, "rubberband-server") }) // before the agents stop: their executors would outlive them
	// The server's address, as Nomad's service catalogue gives it, once it answers: blocking
	// queries on the catalogue (each returns when it changes, or after a second).
	serverOn := func(notNode string) (*client.Client, string) {
		deadline, index := time.Now().Add(90*time.Second), uint64(0)
		for time.Now().Before(deadline) {
			regs, meta, err := n.Client.Services().Get("rubberband", &nomad.QueryOptions{WaitIndex: index, WaitTime: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			index = meta.LastIndex
			for _, r := range regs {
				if r.NodeID == notNode {
					continue
				}
				cl, _ := client.New(fmt.Sprintf("http://%s:%d", r.Address, r.Port), token)
				if _, err := cl.Runs(context.Background()); err == nil {
					return cl, r.NodeID
				}
			}
		}
		t.Fatal("no server answers")
		return nil, ""
	}
	cl, node := serverOn("")
	src, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := cl.Submit(context.Background(), server.Submission{Name: "synthetic.yaml", Spec: string(src)})
	if err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(root, "teams", "ml", run.ID, "journal.jsonl")
	waitEvent(t, cl, run.ID, executor.EvSync)
	if _, err := n.Client.Nodes().UpdateDrain(node, &nomad.DrainSpec{Deadline: 10 * time.Second}, false, nil); err != nil {
		t.Fatal(err)
	}
	moved, to := serverOn(node)
	end := waitRun(t, moved, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || to == node {
		t.Fatalf("after the drain: %+v on node %s (was %s)", end, to, node)
	}
	var best struct{ Trial string }
	if err := moved.Get(context.Background(), run.ID, "best", &best); err != nil || best.Trial != winner {
		t.Fatalf("winner %q (%v); the clean run's is %s", best.Trial, err, winner)
	}
	// Nothing launched twice: no trial-stage is launched again once done.
	events, err := executor.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	for _, e := range events {
		key := fmt.Sprintf("%d/%s", e.Stage, e.Trial)
		switch e.Ev {
		case executor.EvDone:
			done[key] = true
		case executor.EvLaunch:
			if done[key] {
				t.Fatalf("%s launched again after it was done", key)
			}
		}
	}
}

// stopJob deregisters a job and waits (blocking queries, at most 30 s) until none of its
// allocations runs: a task's executor outlives a Nomad agent killed under it.
func stopJob(t *testing.T, c *nomad.Client, id string) {
	if _, _, err := c.Jobs().Deregister(id, false, nil); err != nil {
		t.Errorf("stop job %s: %v", id, err)
		return
	}
	deadline, index := time.Now().Add(30*time.Second), uint64(0)
	for time.Now().Before(deadline) {
		allocs, meta, err := c.Jobs().Allocations(id, false, &nomad.QueryOptions{WaitIndex: index, WaitTime: time.Second})
		if err != nil {
			t.Errorf("allocations of %s: %v", id, err)
			return
		}
		index = meta.LastIndex
		running := false
		for _, a := range allocs {
			running = running || a.ClientStatus == nomad.AllocClientStatusRunning || a.ClientStatus == nomad.AllocClientStatusPending
		}
		if !running {
			return
		}
	}
	t.Errorf("job %s still runs 30 s after it was stopped", id)
}
