package e2e

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

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// examples/deploy/server.nomad.hcl on two local Nomad clients, a real PostgreSQL and MinIO for
// checkpoints, with no folder the two share: the server's root is inside its allocation and its
// runs are mirrored to the database (the job's default). The server's allocation is stopped
// mid-run, its client made ineligible; Nomad places it on the other, whose server takes the
// lease, restores the run's folder from the database and finishes it (a resume in its journal,
// no finish in the first's) with the clean run's winner, nothing launched twice. Its secrets
// (MinIO's keys) come from the job's Nomad Variable.
func TestServerJobMovesOnNomad(t *testing.T) {
	t.Parallel()
	winner := cleanWinner(t)
	pg := servers.StartPostgres(t)
	n := servers.StartNomad(t)
	n.AddClient("a", 0)
	n.AddClient("b", 0)
	minio := servers.RunMinIO(t) // its keys go to the server through the job's Variable
	dir := t.TempDir()
	specFile, _ := syntheticSpec(t, dir, "synthetic.yaml") // its trainer's --spec is absolute: the server runs in its allocation's folder
	openAbove(t, dir)                                      // the server sandboxes its trainers (as root, on the local backend): they read that spec
	if _, _, err := n.Client.Variables().Create(&nomad.Variable{Path: "nomad/jobs/rubberband-server",
		Items: nomad.VariableItems{"AWS_ACCESS_KEY_ID": minio.AccessKey, "AWS_SECRET_ACCESS_KEY": minio.Secret}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--db", pg.URL, "--storage-prefix", "s3://checkpoints/moves"); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--db", pg.URL)
	if code != 0 {
		t.Fatal(errOut)
	}
	token := strings.TrimSpace(out)
	job := exec.Command(n.Bin, "job", "run", "-detach", "-var", "binary="+binary, "-var", "db="+pg.URL,
		"-var", "backend=local", "-var", "lease=2s", "-var", "time_scale=0.05", "examples/deploy/server.nomad.hcl")
	job.Dir = ".."
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
		t.Fatalf("no server answers:\n%s", jobStory(n, "rubberband-server"))
		return nil, ""
	}
	cl, node := serverOn("")
	src, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	// The default checkpoints would stay in the run's folder on the first machine: refused.
	if _, _, err := cl.Submit(context.Background(), server.Submission{Name: "synthetic.yaml", Spec: string(src)}); err == nil || !strings.Contains(err.Error(), "checkpoints.url") {
		t.Fatalf("a spec with its checkpoints in the run's folder: %v", err)
	}
	src = fmt.Appendf(src, "checkpoints: {url: s3://checkpoints/moves, endpoint: %s, insecure: true}\n", minio.Endpoint)
	run, _, err := cl.Submit(context.Background(), server.Submission{Name: "synthetic.yaml", Spec: string(src)})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, cl, run.ID, journal.EvSync)
	// Its client takes no new allocation, and its allocation is stopped: Nomad places the server
	// on the other client.
	stopped := time.Now()
	if _, err := n.Client.Nodes().ToggleEligibility(node, false, nil); err != nil {
		t.Fatal(err)
	}
	allocs, _, err := n.Client.Jobs().Allocations("rubberband-server", false, nil)
	if err != nil || len(allocs) != 1 {
		t.Fatalf("the server's allocations: %d, %v", len(allocs), err)
	}
	if _, err := n.Client.Allocations().Stop(&nomad.Allocation{ID: allocs[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	moved, to := serverOn(node)
	t.Logf("the server answers on the other node %s after its allocation was stopped", time.Since(stopped).Round(100*time.Millisecond))
	end := waitRun(t, moved, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || to == node {
		t.Fatalf("after the move: %+v on node %s (was %s)", end, to, node)
	}
	var best struct{ Trial string }
	if err := moved.Get(context.Background(), run.ID, "best", &best); err != nil || best.Trial != winner {
		t.Fatalf("winner %q (%v); the clean run's is %s", best.Trial, err, winner)
	}
	// The two servers' folders were their allocations' own: the second restored the run's.
	allocs, _, err = n.Client.Jobs().Allocations("rubberband-server", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	journals := map[string]string{} // by node
	var last string
	for _, a := range allocs {
		path := filepath.Join(n.AllocDir(a.ID), "server", "local", "runs", "teams", "ml", run.ID, "journal.jsonl")
		if b, err := os.ReadFile(path); err == nil {
			journals[a.NodeID] = string(b)
			if a.NodeID == to {
				last = path
			}
		}
	}
	has := func(text string, ev journal.Kind) bool { return strings.Contains(text, `"ev":"`+string(ev)+`"`) }
	if !has(journals[to], journal.EvResume) || has(journals[node], journal.EvFinish) {
		t.Errorf("the run did not move mid-run: the first server's journal finishes it (%v), the second's resumes it (%v)",
			has(journals[node], journal.EvFinish), has(journals[to], journal.EvResume))
	}
	// What the first driver synced (its decisions, the sync the test waited for) the second's
	// journal holds; results it noted in its last 100 ms, before the copy, may be gone: their
	// trials rerun from their checkpoints.
	first, second := journals[node], journals[to]
	common := 0
	for common < min(len(first), len(second)) && first[common] == second[common] {
		common++
	}
	if len(journals) != 2 || !has(first[:common], journal.EvSync) || len(second) <= common {
		t.Fatalf("%d of %d allocations hold the run's journal; the second's (%d bytes) shares %d with the first's (%d bytes), through its first sync: %v\n%s",
			len(journals), len(allocs), len(second), common, len(first), has(first[:common], journal.EvSync), jobStory(n, "rubberband-server"))
	}
	launchedOnce(t, last)
}

// launchedOnce fails the test if the journal at path launches a trial's stage again once it was
// done: a run that moved between drivers launched nothing twice.
func launchedOnce(t *testing.T, path string) {
	t.Helper()
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	for _, e := range events {
		key := fmt.Sprintf("%d/%s", e.Stage, e.Trial)
		switch e.Ev {
		case journal.EvDone:
			done[key] = true
		case journal.EvLaunch:
			if done[key] {
				t.Fatalf("%s launched again after it was done", key)
			}
		}
	}
	if len(done) == 0 {
		t.Fatalf("%s: no trial done", path)
	}
}

// jobStory is what a job's allocations went through and their tasks wrote to standard error:
// why a job that should serve does not.
func jobStory(n *servers.Nomad, id string) string {
	allocs, _, err := n.Client.Jobs().Allocations(id, true, nil)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, a := range allocs {
		fmt.Fprintf(&b, "allocation %s on %s: %s\n", a.ID, a.NodeID, a.ClientStatus)
		for task, st := range a.TaskStates {
			for _, e := range st.Events {
				fmt.Fprintf(&b, "  %s: %s %s\n", task, e.Type, e.DisplayMessage)
			}
			logs, _ := filepath.Glob(filepath.Join(n.AllocDir(a.ID), "alloc", "logs", task+".std*"))
			for _, l := range logs {
				fmt.Fprintf(&b, "  %s:\n%s\n", filepath.Base(l), readFileBytes(l))
			}
		}
	}
	return b.String()
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
