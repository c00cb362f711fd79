package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// nomadSeen is every job definition and Nomad Variable the driver's Nomad server held while a
// run went on, as JSON, polled.
type nomadSeen struct {
	mu    sync.Mutex
	jobs  map[string]string // job ID -> its definition
	vars  map[string]string // path -> its items
	polls int
	err   error // the last failed poll's
}

// watchNomad reads every job definition and Nomad Variable the run's own Nomad server holds
// while ctx lasts, as they change: blocking queries on the job and variable lists (each answers
// when its list changes), read with the run's fleet certificate and token. It starts once the
// driver rents its first instance: its Nomad server listens by then (the instances join it).
func watchNomad(ctx context.Context, sim *ec2sim.Server, state string) *nomadSeen {
	seen := &nomadSeen{jobs: map[string]string{}, vars: map[string]string{}}
	go func() {
		client, err := connectRunNomad(ctx, sim, state)
		if err != nil {
			seen.mu.Lock()
			seen.err = err
			seen.mu.Unlock()
			return
		}
		go follow(ctx, seen, "variable ", func(q *nomadapi.QueryOptions) (map[string]string, *nomadapi.QueryMeta, error) {
			vars, meta, err := client.Variables().List(q)
			found := map[string]string{}
			for _, v := range vars {
				if full, _, rerr := client.Variables().Read(v.Path, (&nomadapi.QueryOptions{}).WithContext(ctx)); rerr == nil {
					b, _ := json.Marshal(full)
					found[v.Path] = string(b)
				}
			}
			return found, meta, err
		}, seen.vars)
		follow(ctx, seen, "job ", func(q *nomadapi.QueryOptions) (map[string]string, *nomadapi.QueryMeta, error) {
			jobs, meta, err := client.Jobs().List(q)
			found := map[string]string{}
			for _, j := range jobs {
				if job, _, jerr := client.Jobs().Info(j.ID, (&nomadapi.QueryOptions{}).WithContext(ctx)); jerr == nil {
					b, _ := json.Marshal(job)
					found[j.ID] = string(b)
				}
			}
			return found, meta, err
		}, seen.jobs)
	}()
	return seen
}

// connectRunNomad is an API client of the run's own Nomad server, once the driver has rented an
// instance (its server is up and has written where it listens).
func connectRunNomad(ctx context.Context, sim *ec2sim.Server, state string) (*nomadapi.Client, error) {
	if err := sim.WaitLaunched(ctx, 1); err != nil {
		return nil, err
	}
	var st struct {
		Addr  string
		Ports [3]int
	}
	b, err := os.ReadFile(filepath.Join(state, rundir.NomadDir, "server", "server.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return nil, fmt.Errorf("the run's Nomad server: %w", err)
	}
	fleet, err := nomadlocal.OpenFleet(filepath.Join(state, rundir.NomadDir, "fleet"))
	if err != nil {
		return nil, err
	}
	return nomadapi.NewClient(fleet.APIConfig(fmt.Sprintf("https://%s:%d", cmp.Or(st.Addr, "127.0.0.1"), st.Ports[0])))
}

// follow lists with blocking queries until ctx ends, adding what each answer holds to into. A
// failed query ends it (the server is gone: the run ended), said in seen.err while ctx lasts.
func follow(ctx context.Context, seen *nomadSeen, prefix string, list func(*nomadapi.QueryOptions) (map[string]string, *nomadapi.QueryMeta, error), into map[string]string) {
	index := uint64(0)
	for ctx.Err() == nil {
		found, meta, err := list((&nomadapi.QueryOptions{WaitIndex: index, WaitTime: 5 * time.Second}).WithContext(ctx))
		seen.mu.Lock()
		if err == nil {
			seen.polls++
			index = meta.LastIndex
		} else if ctx.Err() == nil {
			seen.err = fmt.Errorf("%s: %w", prefix, err)
		}
		for k, v := range found {
			into[prefix+k] = v
		}
		seen.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// With cluster.ec2.instance_profile, the instances hold no credentials: their node agents and
// workers read and write checkpoints with the role's, through IMDSv2, and the run finishes. The
// driver's own keys (distinct ones, that the test sets) never leave it: they appear in no job
// definition nor Nomad Variable the driver's Nomad server held during the run, in no instance's
// user-data, and in no file of the run: its state (journal, logs, the Nomad server's data), the
// instances' directories (consoles, Nomad clients' data, task directories). The run's security
// group is gone at the end, and the IAM policy allows every call.
func TestEC2InstanceProfileKeepsDriverKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := startEC2Fixture(t, dir, true)
	key, secret, token := f.minio.TemporaryKeys(t) // the driver's own, distinct from MinIO's (which the instances' role gets)
	env := append(f.env, "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret, "AWS_SESSION_TOKEN="+token)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, f.spec, "4,4,2")
	ctx, stop := context.WithCancel(t.Context())
	seen := watchNomad(ctx, f.sim, state)
	driver := startRun(t, env, "run", f.spec, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.05")
	err := driver.Wait()
	stop()
	out := driver.Stdout.(*bytes.Buffer).String()
	if !ranToEnd(err) {
		t.Fatalf("run: %v\n%s\nconsoles:\n%s", err, out, consoles(f.sim))
	}
	if rep := readRunReport(t, state); !rep.Finished || rep.Best == nil {
		t.Fatalf("run: finished %v, best %+v", rep.Finished, rep.Best)
	}
	if strings.Contains(out, "instance_profile is not set") {
		t.Errorf("the driver warns of a missing instance profile:\n%s", out)
	}
	insts := f.sim.Instances()
	for _, in := range insts {
		if in.InstanceProfile != "rubberband-node" || in.State != ec2sim.StateTerminated {
			t.Errorf("%s: profile %q, %s", in.ID, in.InstanceProfile, in.State)
		}
	}

	keys := map[string]string{"access key ID": key, "secret key": secret, "session token": token}
	leaks := func(where, text string) {
		for what, k := range keys {
			if strings.Contains(text, k) {
				t.Errorf("the driver's %s appears in %s", what, where)
			}
		}
	}
	leaks("the driver's output", out)
	seen.mu.Lock()
	if seen.polls == 0 || len(seen.jobs) == 0 {
		t.Errorf("the driver's Nomad server was read %d times, %d jobs seen (%v): nothing checked", seen.polls, len(seen.jobs), seen.err)
	}
	for _, m := range []map[string]string{seen.jobs, seen.vars} {
		for what, def := range m {
			leaks(what, def)
		}
	}
	jobs, vars := len(seen.jobs), len(seen.vars)
	seen.mu.Unlock()
	for _, in := range insts {
		leaks("the user-data of "+in.ID, string(in.UserData))
	}
	// Every file; those that name the run show that the search reads what the run wrote.
	runID := runIDOf(t, state)
	files, naming := 0, 0
	for _, root := range []string{dir, f.sim.Dir()} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(path); err == nil {
				files++
				if bytes.Contains(b, []byte(runID)) {
					naming++
				}
				leaks(path, string(b))
			}
			return nil
		})
	}
	if naming < 3 {
		t.Errorf("%d of %d files name the run %s: the search did not read the run's files", naming, files, runID)
	}
	checkRunGroups(t, f.sim, runID)
	checkPolicy(t, f.sim)
	t.Logf("%d instances with the role's credentials; the driver's keys in none of %d jobs, %d variables, %d files (%d naming the run)", len(insts), jobs, vars, files, naming)
}

// runIDOf is the run ID of the run in state.
func runIDOf(t *testing.T, state string) string {
	t.Helper()
	var rf rundir.RunFile
	b, err := os.ReadFile(filepath.Join(state, rundir.RunJSON))
	if err != nil || json.Unmarshal(b, &rf) != nil || rf.RunID == "" {
		t.Fatalf("no run ID in %s: %v", state, err)
	}
	return rf.RunID
}
