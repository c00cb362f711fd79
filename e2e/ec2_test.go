package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// specGroup is the spec's own security group (cluster.ec2.security_groups), one the fake did not
// make: it stands for one that exists.
const specGroup = "sg-0123456789abcdef0"

// ec2Spec is a small synthetic SHA job on g3.8xlarge (2 GPUs) nodes of the fake's subnets and a
// security group of its own, its checkpoints in MinIO.
func ec2Spec(t testing.TB, dir, endpoint string) string {
	t.Helper()
	file := filepath.Join(dir, "ec2.yaml")
	spec := fmt.Sprintf(`name: e2e-ec2
deadline: 10m
seed: 11
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}
search_space:
  x: {type: uniform, min: 0, max: 1}
  y: {type: int, min: 1, max: 100}
trainer: {command: [rubberband, trainer, synthetic, --spec, %s]}
cluster:
  instance_type: g3.8xlarge
  billing: {minimum: 0s}
  scale_latency: {value: 20s}
  init_latency: {value: 5s}
  max_nodes: 2
  ec2:
    ami: ami-0123456789abcdef0
    subnets: [subnet-0a0000000000000a1, subnet-0b0000000000000b2]
    security_groups: [%s]
    user_data: echo extra user-data ran
profile:
  iter_latency: {1: {mean: 4, std: 0.4}, 2: {mean: 2.2, std: 0.2}, 4: {mean: 1.3, std: 0.1}}
  startup_latency: {value: 1s}
planner: {samples: 100}
checkpoints: {url: s3://checkpoints/e2e-ec2, endpoint: %s, insecure: true}
`, file, specGroup, endpoint)
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// ec2Env starts the fake EC2 (instances boot in a second and run their user-data here) and
// MinIO for one test, and returns the fake, the spec and the driver's environment: the fake's
// endpoints, the AMI's paths pointed at this machine's binaries, nothing of the machine's own
// AWS configuration. The nodes read MinIO with credentials an AMI could hold, in a file.
func ec2Env(t testing.TB, dir string) (*ec2sim.Server, string, []string) {
	t.Helper()
	f := startEC2Fixture(t, dir, false)
	return f.sim, f.spec, f.env
}

// ec2Fixture is what an EC2 test runs against: the fake, MinIO, the spec and the driver's
// environment (MinIO's keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which the fake
// takes too: not the test process's, so that EC2 tests run side by side).
type ec2Fixture struct {
	sim   *ec2sim.Server
	minio *servers.MinIO
	spec  string
	env   []string
}

// startEC2Fixture is ec2Env; with profile, the nodes hold no credentials and get MinIO's from
// their IMDS, as the role of the spec's cluster.ec2.instance_profile.
func startEC2Fixture(t testing.TB, dir string, profile bool) ec2Fixture {
	t.Helper()
	nomadBin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	minio := servers.RunMinIO(t) // its keys go to the driver in env, to the nodes as below
	dataDir := filepath.Join(dir, "nodes")
	cfg := ec2sim.Config{BootDelay: time.Second, Env: []string{"PATH=" + filepath.Dir(binary) + ":" + filepath.Dir(nomadBin) + ":/usr/bin:/bin"}}
	if profile {
		cfg.InstanceCredentials = &ec2sim.Credentials{AccessKeyID: minio.AccessKey, SecretAccessKey: minio.Secret}
	} else {
		// The nodes' credentials for MinIO, as an AMI could hold them: in a file. In the
		// environment they would not reach the workers (Nomad's default env denylist drops
		// AWS_ACCESS_KEY_ID).
		creds := filepath.Join(dir, "node-credentials")
		os.WriteFile(creds, []byte(fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", minio.AccessKey, minio.Secret)), 0o600)
		cfg.Env = append(cfg.Env, "AWS_SHARED_CREDENTIALS_FILE="+creds)
	}
	sim, err := ec2sim.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close(); nomadlocal.UnmountUnder(dataDir) })
	specFile := ec2Spec(t, dir, minio.Endpoint)
	if profile {
		src, _ := os.ReadFile(specFile)
		os.WriteFile(specFile, []byte(strings.Replace(string(src), "    user_data:", "    instance_profile: rubberband-node\n    user_data:", 1)), 0o644)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	env := []string{"RB_NOMAD_BIN=" + nomadBin, "NOMAD_ADDR=", "RB_EC2_AGENT_BIN=" + binary, "RB_EC2_NOMAD_BIN=" + nomadBin,
		"RB_EC2_DATA_DIR=" + dataDir, "AWS_CONFIG_FILE=" + empty, "AWS_SHARED_CREDENTIALS_FILE=" + empty,
		"AWS_ACCESS_KEY_ID=" + minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + minio.Secret}
	for k, v := range sim.ClientEnv() {
		if k != "AWS_ACCESS_KEY_ID" && k != "AWS_SECRET_ACCESS_KEY" { // the fake takes any key: MinIO's serve both
			env = append(env, k+"="+v)
		}
	}
	return ec2Fixture{sim: sim, minio: minio, spec: specFile, env: env}
}

// A full SHA job with --backend ec2 against the fake EC2: each instance's user-data runs
// `rubberband node-agent`, whose Nomad client joins the driver's server; gangs run there with
// checkpoints in MinIO; the winner is the local backend's; every instance is terminated at the
// end, and each carried the run's tag and sat in the run's own security group (beside the
// spec's), which is deleted after them; the IAM policy allows every call.
func TestEC2Backend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4,4,2") // two nodes from the first stage: instances side by side
	rep := runEC2(t, sim, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.05", "-o", "json")
	outbound, err := nomadlocal.OutboundAddr()
	if err != nil {
		outbound = "127.0.0.1" // no route out: the driver falls back to loopback
	}
	var rf rundir.RunFile
	b, _ := os.ReadFile(filepath.Join(state, rundir.RunJSON))
	json.Unmarshal(b, &rf)

	insts := sim.Instances()
	if len(insts) < 2 {
		t.Fatalf("%d instance(s) launched, want 2 at least", len(insts))
	}
	for _, in := range insts {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after the run", in.ID, in.State)
		}
		if in.Tags[ec2.TagRun] != rf.RunID || rf.RunID == "" {
			t.Errorf("%s: tag %s = %q, run %q", in.ID, ec2.TagRun, in.Tags[ec2.TagRun], rf.RunID)
		}
		// The AMI's paths (here, by RB_EC2_*), and the driver's server to join, on this host's
		// outbound address (instances do not share the driver's loopback); the fleet's client
		// key only in the agent's environment. Not printed: it holds the key.
		ud := string(in.UserData)
		if !strings.Contains(ud, "exec "+binary+" node-agent --server "+outbound+":") || !strings.Contains(ud, "echo extra user-data ran") {
			t.Errorf("%s: user-data does not start the agent against the server on %s, after the extra user-data", in.ID, outbound)
		}
		agentLine, _, _ := strings.Cut(ud[strings.Index(ud, "exec "):], "\n")
		if !strings.Contains(ud, "export RB_NOMAD_KEY_PEM='-----BEGIN EC PRIVATE KEY-----") || strings.Contains(agentLine, "PRIVATE KEY") ||
			!strings.Contains(agentLine, " --driver raw_exec --acl") {
			t.Errorf("%s: user-data does not hand the agent its credentials in its environment, with ACLs and raw_exec alone", in.ID)
		}
		// The instance's Nomad client was locked down: mutual TLS, ACLs, its key 0600.
		conf, err := os.ReadFile(filepath.Join(dir, "nodes", in.ID, "client.hcl"))
		if err != nil || !strings.Contains(string(conf), "verify_https_client = true") || !strings.Contains(string(conf), "acl { enabled = true }") {
			t.Errorf("%s: client.hcl (%v):\n%s", in.ID, err, conf)
		}
		if st, err := os.Stat(filepath.Join(dir, "nodes", in.ID, "tls", "client-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: client key %v, %v", in.ID, st, err)
		}
	}
	checkRunGroups(t, sim, rf.RunID)
	checkPolicy(t, sim)
	local := filepath.Join(dir, "local")
	if _, errOut, code := rbEnv(t, binary, env, "run", specFile, "--state", local, "--time-scale", "0.02"); !finishedCode(code) {
		t.Fatal(errOut)
	}
	want := readRunReport(t, local)
	if !rep.Finished || rep.Best == nil || want.Best == nil || rep.Best.Trial != want.Best.Trial {
		t.Fatalf("ec2 best %+v, local best %+v", rep.Best, want.Best)
	}
	t.Logf("%d instance(s), best %s; cost realized $%.4f, predicted $%.4f (%+.1f%%); JCT realized %.1f s, predicted %.1f s (spec seconds)",
		len(insts), rep.Best.Trial, rep.Realized.Cost, rep.Predicted.Cost, format.Pct(rep.Realized.Cost, rep.Predicted.Cost), rep.Realized.JCT, rep.Predicted.JCT)
}

// runEC2 runs the CLI with args (a run on the fake EC2, -o json) in the driver's environment env
// to its end, and returns its report; a failed run fails the test with every instance's console.
func runEC2(t *testing.T, sim *ec2sim.Server, env []string, args ...string) runstate.Report {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); !ranToEnd(err) {
		t.Fatalf("run on ec2: %v\n%s\nconsoles:\n%s", err, stderr.String(), consoles(sim))
	}
	t.Logf("ec2 run: %s", time.Since(start).Round(time.Millisecond))
	var rep runstate.Report
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	return rep
}

// checkInterruptions reads a journal of a run whose nodes were interrupted: the nodes journaled
// as interrupted, the tries that lost their node, and where each trial that lost one went on.
// A try that failed for another reason, or a trial that went on anywhere but one iteration past
// its last report (work lost), fails the test; going on at its last report is the re-report of a
// checkpoint at the stage's target, and must then be the stage's result.
func checkInterruptions(t *testing.T, events []journal.Event) (map[string]bool, int, map[string]int) {
	t.Helper()
	journaled := map[string]bool{}
	lastIter := map[string]int{} // each trial's last reported iteration
	resumed := map[string]int{}  // trials relaunched after losing their node: where they went on
	reReported := map[string]int{}
	tries := 0
	for _, e := range events {
		switch {
		case e.Ev == journal.EvInterrupt:
			for _, n := range e.Nodes {
				journaled[n] = true
			}
		case e.Ev == journal.EvFail && e.Interrupted:
			tries++
			resumed[e.Trial] = -1
		case e.Ev == journal.EvFail:
			t.Errorf("a try failed for another reason than an interruption: %+v", e)
		case e.Ev == journal.EvReport:
			if resumed[e.Trial] == -1 {
				resumed[e.Trial] = e.Iter
				switch e.Iter {
				case lastIter[e.Trial] + 1:
				case lastIter[e.Trial]:
					reReported[e.Trial] = e.Iter
				default:
					t.Errorf("trial %s went on at iteration %d after its node was interrupted at iteration %d: work lost", e.Trial, e.Iter, lastIter[e.Trial])
				}
			} else if _, ok := reReported[e.Trial]; ok {
				t.Errorf("trial %s trained on after going on at its last report, iteration %d: it was not at its target, work lost", e.Trial, reReported[e.Trial])
				delete(reReported, e.Trial)
			}
			lastIter[e.Trial] = e.Iter
		case e.Ev == journal.EvDone:
			if it, ok := reReported[e.Trial]; ok && it == e.Iter {
				delete(reReported, e.Trial)
			}
		}
	}
	for trial, it := range reReported {
		t.Errorf("trial %s went on at its last report, iteration %d, which was not its stage's result: work lost", trial, it)
	}
	return journaled, tries, resumed
}

// sameWinnerAsLocal runs spec's plan on the local backend, on-demand and uninterrupted, in
// state (with env: the store's keys), and fails the test unless the run reported in rep
// finished with its winner.
func sameWinnerAsLocal(t *testing.T, env []string, rep runstate.Report, specFile, plan, state string) {
	t.Helper()
	if _, errOut, code := rbEnv(t, binary, env, "run", specFile, "--plan", plan, "--state", state, "--time-scale", "0.01"); !finishedCode(code) {
		t.Fatal(errOut)
	}
	want := readRunReport(t, state)
	if !rep.Finished || rep.Best == nil || want.Best == nil || rep.Best.Trial != want.Best.Trial || rep.Best.Metric != want.Best.Metric {
		t.Fatalf("best %+v, the local backend's %+v", rep.Best, want.Best)
	}
}

// consoles is every instance's console.log, for a failure's message.
func consoles(sim *ec2sim.Server) string {
	var b strings.Builder
	for _, in := range sim.Instances() {
		log, _ := os.ReadFile(filepath.Join(sim.Dir(), in.ID, "console.log"))
		fmt.Fprintf(&b, "--- %s (%s)\n%s", in.ID, in.State, log)
	}
	return b.String()
}

// An ec2 run is refused before anything is rented when its spec lacks what instances need: a
// cluster.ec2 block, and checkpoints in S3 (instances share no disk with the driver).
func TestEC2BackendUsage(t *testing.T) {
	dir := t.TempDir()
	noEC2, _ := syntheticSpec(t, dir, "synthetic.yaml")
	fileStore := ec2Spec(t, dir, "127.0.0.1:1")
	b, _ := os.ReadFile(fileStore)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "checkpoints:") {
			lines[i] = "checkpoints: {url: file:///tmp/ckpt}"
		}
	}
	os.WriteFile(fileStore, []byte(strings.Join(lines, "\n")), 0o644)
	for file, want := range map[string]string{noEC2: "needs a cluster.ec2 block", fileStore: "needs checkpoints in S3"} {
		state := filepath.Join(dir, "state-"+filepath.Base(file))
		_, errOut, code := rb(t, "run", file, "--backend", "ec2", "--state", state)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, want 2 and %q: %s", filepath.Base(file), code, want, errOut)
		}
		if _, err := os.Stat(filepath.Join(state, rundir.RunJSON)); err == nil {
			t.Errorf("%s: a refused run left run.json", filepath.Base(file))
		}
	}
}

// `rubberband cancel` of a running ec2 run: the driver stops its gangs, terminates every
// instance it rented and deletes the run's security group once they are gone.
func TestEC2Cancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4,4,2")
	driver := startRun(t, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.2")
	waitFor(t, state, "running gangs", func(j string) bool { return strings.Count(j, `"ev":"launch"`) >= 2 })
	if out, errOut, code := rbEnv(t, binary, env, "cancel", state); code != 0 || !strings.Contains(out, "is cancelled") {
		t.Fatalf("cancel: exit %d: %s\n%s", code, errOut, out)
	}
	driver.Wait()
	insts := sim.Instances()
	if len(insts) < 2 || driver.ProcessState.ExitCode() != 1 {
		t.Fatalf("%d instance(s); the cancelled driver exited %d", len(insts), driver.ProcessState.ExitCode())
	}
	for _, in := range insts {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after cancel", in.ID, in.State)
		}
	}
	checkRunGroups(t, sim, runIDOf(t, state))
	checkPolicy(t, sim)
}

// checkRunGroups checks the security groups of the run: each made by the driver, named after
// the run and tagged with it; every instance sat in one of them beside the spec's group; and
// every one is deleted, after the last instance that held it was terminated (EC2 would refuse
// before), with nothing left. A driver that cancels opens its backend again for the cancel,
// and makes the group again when the first is gone.
func checkRunGroups(t *testing.T, sim *ec2sim.Server, runID string) {
	t.Helper()
	made := 0
	deleted := map[string]time.Time{}
	for _, c := range sim.Calls() {
		switch {
		case c.Error != "":
		case c.Action == "CreateSecurityGroup":
			made++
			if c.Params["GroupName"] != ec2.GroupName(runID) || !callTagged(c, ec2.TagRun, runID) || !callTagged(c, ec2.TagExperiment, "e2e-ec2") {
				t.Errorf("a security group not the run's: %v", c.Params)
			}
		case c.Action == "DeleteSecurityGroup":
			deleted[c.Params["GroupId"]] = c.Time
		}
	}
	if made == 0 || len(deleted) != made {
		t.Errorf("%d security group(s) made, %d deleted", made, len(deleted))
	}
	for _, in := range sim.Instances() {
		if len(in.SecurityGroups) != 2 || in.SecurityGroups[0] != specGroup {
			t.Errorf("%s sat in groups %v, want the spec's %s and the run's", in.ID, in.SecurityGroups, specGroup)
			continue
		}
		if at, ok := deleted[in.SecurityGroups[1]]; !ok || at.Before(in.EndTime) {
			t.Errorf("%s's group %s deleted at %v (ok %v), the instance terminated at %v", in.ID, in.SecurityGroups[1], at, ok, in.EndTime)
		}
	}
	if left := sim.SecurityGroups(); len(left) != 0 {
		t.Errorf("security groups left: %+v", left)
	}
}

// callTagged says whether a call tags what it makes with key = value.
func callTagged(c ec2sim.Call, key, value string) bool {
	for k, v := range c.Params {
		if strings.HasSuffix(k, ".Key") && v == key && c.Params[strings.TrimSuffix(k, ".Key")+".Value"] == value {
			return true
		}
	}
	return false
}

// Instances never bill forever: a driver killed for good stops beating, and after
// cluster.ec2.watchdog each instance's agent stops its Nomad client and powers the instance
// off, which (shutdown behaviour terminate) terminates it, with nobody calling EC2.
func TestEC2WatchdogEndsInstancesOfADeadDriver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	src, _ := os.ReadFile(specFile)
	os.WriteFile(specFile, []byte(strings.Replace(string(src), "    user_data:", "    watchdog: 30s\n    user_data:", 1)), 0o644)
	env = append(env, "RB_EC2_SHUTDOWN=true") // a fake instance's shutdown is its user-data's exit
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4,4,2")
	driver := startRun(t, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.2")
	waitFor(t, state, "running gangs", func(j string) bool { return strings.Count(j, `"ev":"launch"`) >= 2 })
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()
	killed := time.Now()
	t.Cleanup(func() { killProcessesWith(state) }) // the dead driver's own Nomad server
	insts := sim.Instances()
	if len(insts) == 0 {
		t.Fatal("no instance was rented")
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		left := 0
		for _, in := range sim.Instances() {
			if in.State != ec2sim.StateTerminated {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d instance(s) still billing %s after the driver died\n%s", left, time.Since(killed).Round(time.Second), consoles(sim))
		}
	}
	took := time.Since(killed)
	for _, in := range sim.Instances() {
		if in.StateReason != ec2sim.ReasonInstanceInitiated {
			t.Errorf("%s ended by %q, not by its own shutdown", in.ID, in.StateReason)
		}
	}
	if log := consoles(sim); !strings.Contains(log, "no heartbeat from the driver") {
		t.Fatalf("no console says why:\n%s", log)
	}
	if took < 20*time.Second {
		t.Fatalf("instances ended %s after the driver died: before the 30 s watchdog", took)
	}
	// The dead driver's security group outlives it: cleanup deletes it.
	if n := len(sim.SecurityGroups()); n != 1 {
		t.Fatalf("%d security groups after the driver died, want its one", n)
	}
	if out, errOut, code := rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--experiment", "e2e-ec2", "--yes"); code != 0 ||
		!strings.Contains(out, "deleted 1 security group of experiment e2e-ec2") || len(sim.SecurityGroups()) != 0 {
		t.Fatalf("cleanup: exit %d, groups left %+v\n%s%s", code, sim.SecurityGroups(), out, errOut)
	}
	t.Logf("%d instance(s) terminated themselves %s after the driver was killed (watchdog 30 s, a beat every 10 s)", len(insts), took.Round(time.Second))
}

// interruptedEC2Run runs the spot job of the tests below on the fake EC2 (stage 0 on two spot
// instances, one trial a GPU, at time scale 0.1: an iteration of 4 s is 0.4 s, a trial of stage 0
// trains for 4 s), gives both instances a notice of notice (wall time) once stage 0 has
// reported, and waits for the run's end: what the tests check it by.
func interruptedEC2Run(t *testing.T, notice time.Duration) (sim *ec2sim.Server, dir, specFile string, env []string, state, plan string, doomed []string, driver *exec.Cmd) {
	t.Helper()
	dir = t.TempDir()
	sim, specFile, env = ec2Env(t, dir)
	longerTrials(t, specFile, "  max_nodes: 2\n  market: spot\n")
	state = filepath.Join(dir, "state")
	plan = planFile(t, dir, specFile, "4,2")
	driver = startRun(t, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.1")
	waitStageReports(t, state, 4)
	for _, in := range sim.Instances() {
		if in.State == ec2sim.StateRunning {
			if in.Market != ec2sim.MarketSpot {
				t.Fatalf("%s was rented %s, not spot", in.ID, in.Market)
			}
			if err := sim.Interrupt(in.ID, notice); err != nil {
				t.Fatal(err)
			}
			doomed = append(doomed, in.ID)
		}
	}
	if len(doomed) != 2 {
		t.Fatalf("interrupted %v, want the two instances of stage 0", doomed)
	}
	if err := driver.Wait(); !ranToEnd(err) {
		t.Fatalf("run: %v\n%s\nconsoles:\n%s", err, driver.Stdout, consoles(sim))
	}
	return sim, dir, specFile, env, state, plan, doomed, driver
}

// A spot job on the fake EC2 whose two instances are interrupted mid-stage: each instance's
// IMDS serves the notice, the workers there stop their trainers (which save), the driver
// journals the interruptions, terminates the doomed instances, rents replacements and relaunches
// the gangs from their checkpoints. Nothing is lost: every trial continues from the iteration it
// reached, the winner is the local backend's, the report lists the interruptions, and every
// instance is terminated at the end.
func TestEC2SpotInterruptions(t *testing.T) {
	t.Parallel()
	sim, dir, specFile, env, state, plan, doomed, driver := interruptedEC2Run(t, 4*time.Second)
	t.Logf("driver:\n%s", driver.Stdout)
	rep := readRunReport(t, state)

	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	journaled, interruptedTries, resumed := checkInterruptions(t, events)
	for _, id := range doomed {
		if !journaled[id] {
			t.Errorf("the interruption of %s is not in the journal", id)
		}
	}
	if interruptedTries == 0 || rep.Stages[0].Realized.Interrupted != interruptedTries || rep.Stages[0].Realized.Done != 4 || rep.Stages[0].Realized.Retries != 0 {
		t.Fatalf("%d interrupted tries; stage 0 %+v", interruptedTries, rep.Stages[0].Realized)
	}
	inReport := map[string]bool{}
	for _, in := range rep.Interruptions {
		for _, n := range in.Nodes {
			inReport[n] = true
		}
	}
	if len(inReport) != 2 || !inReport[doomed[0]] || !inReport[doomed[1]] {
		t.Fatalf("report interruptions %+v, want %v", rep.Interruptions, doomed)
	}
	insts := sim.Instances()
	for _, in := range insts {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after the run", in.ID, in.State)
		}
	}
	checkRunGroups(t, sim, runIDOf(t, state))
	sameWinnerAsLocal(t, env, rep, specFile, plan, filepath.Join(dir, "local"))
	t.Logf("%d instance(s) rented, %d interrupted (%d tries relaunched from their checkpoints: %v); cost realized $%.4f, predicted $%.4f (%+.1f%%); JCT realized %.1f s, predicted %.1f s",
		len(insts), len(doomed), interruptedTries, resumed, rep.Realized.Cost, rep.Predicted.Cost, format.Pct(rep.Realized.Cost, rep.Predicted.Cost), rep.Realized.JCT, rep.Predicted.JCT)
}

// The same job trains through the notice: each instance's IMDS serves a notice of 12 s (two
// spec minutes at time scale 0.1), the workers there give it to the driver through the run's
// store and train on (until 4 s, the grace and the time to save, before EC2 acts); the driver
// journals each node as being interrupted (still billing), asks for a replacement at once and
// launches nothing more there. Each gang there either gets done on its doomed node or moves to the
// replacement at its next checkpoint: nothing is lost, the winner is the local backend's, and
// every instance is terminated at the end.
func TestEC2TrainsThroughTheNotice(t *testing.T) {
	t.Parallel()
	sim, dir, specFile, env, state, plan, doomed, driver := interruptedEC2Run(t, 12*time.Second)
	if said := fmt.Sprint(driver.Stdout); !strings.Contains(said, "training on until its replacement is up or it goes") {
		t.Errorf("the driver did not say it trains through the notice:\n%s", said)
	}
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	draining := map[string]bool{}
	for _, e := range events {
		if e.Ev == journal.EvInterrupt && e.Draining {
			for _, n := range e.Nodes {
				draining[n] = true
			}
		}
	}
	for _, id := range doomed {
		if !draining[id] {
			t.Errorf("%s's notice is not journaled as an interruption it trains through (draining): %v", id, draining)
		}
	}
	_, tries, resumed := checkInterruptions(t, events) // nothing lost, whatever moved
	rep := readRunReport(t, state)
	if rep.Stages[0].Realized.Done != 4 || rep.Stages[0].Realized.Retries != 0 {
		t.Fatalf("stage 0 %+v", rep.Stages[0].Realized)
	}
	for _, in := range sim.Instances() {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after the run", in.ID, in.State)
		}
	}
	sameWinnerAsLocal(t, env, rep, specFile, plan, filepath.Join(dir, "local"))
	t.Logf("%d doomed; %d tries moved to a replacement (%v), the rest done on their doomed nodes; cost realized $%.4f, predicted $%.4f; JCT realized %.1f s, predicted %.1f s",
		len(doomed), tries, resumed, rep.Realized.Cost, rep.Predicted.Cost, rep.Realized.JCT, rep.Predicted.JCT)
}

// No capacity in the first zone: every request falls over to the next subnet's zone, the run
// finishes there, its nodes are journaled with the zone they were rented in, and the driver says
// why it went elsewhere.
func TestEC2CapacityFallsOverToTheNextZone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	sim.FailCapacity(ec2sim.DefaultRegion+"a", "InsufficientInstanceCapacity", 1000)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4,4,2")
	out, errOut, code := rbEnv(t, binary, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.05")
	if !finishedCode(code) {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	insts := sim.Instances()
	if len(insts) != 2 {
		t.Fatalf("%d instances rented, want the plan's 2", len(insts))
	}
	for _, in := range insts {
		if in.AZ != ec2sim.DefaultRegion+"b" || in.State != ec2sim.StateTerminated {
			t.Errorf("%s: %s, %s", in.ID, in.AZ, in.State)
		}
	}
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	up := 0
	for _, e := range events {
		if e.Ev == journal.EvNodeUp {
			up++
			if e.Node.Zone != ec2sim.DefaultRegion+"b" {
				t.Errorf("node_up %s journaled in zone %q", e.Node.ID, e.Node.Zone)
			}
		}
	}
	if up != 2 || !strings.Contains(errOut, "after on-demand subnet-0a0000000000000a1: InsufficientInstanceCapacity") {
		t.Fatalf("%d node_up events; the driver said:\n%s", up, errOut)
	}
	checkRunGroups(t, sim, runIDOf(t, state))
}

// The driver killed while its RunInstances calls are in flight (EC2 has rented, no answer has
// come back), then resumed: the resumed driver finds the dead one's Nomad server still running
// and takes it over, repeats the journaled request under the same client tokens and gets the same
// instances back. No instance is rented twice, none is left running, and the run finishes.
func TestEC2ResumeAfterKillMidRunInstances(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	sim.StallRunInstances(time.Minute, time.Minute)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4,4,2")
	driver := startRun(t, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.05")
	t.Cleanup(func() { killProcessesWith(state) }) // the dead driver's Nomad server, should the test fail
	for deadline := time.Now().Add(90 * time.Second); len(sim.Instances()) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the driver rented %d instance(s)", len(sim.Instances()))
		}
	}
	journal, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
	if !strings.Contains(string(journal), `"ev":"request"`) || strings.Contains(string(journal), `"ev":"node_up"`) {
		t.Fatalf("killed at the wrong moment:\n%s", journal)
	}
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()
	var rented []string
	for _, in := range sim.Instances() {
		rented = append(rented, in.ID)
	}
	out, errOut, code := rbEnv(t, binary, env, "resume", state)
	if !finishedCode(code) {
		t.Fatalf("resume: exit %d\n%s\n%s\nconsoles:\n%s", code, errOut, out, consoles(sim))
	}
	if !strings.Contains(errOut, "this driver takes it over") {
		t.Errorf("the resumed driver did not take over the dead one's Nomad server:\n%s", errOut)
	}
	insts := sim.Instances()
	if len(insts) != 2 {
		var ids []string
		for _, in := range insts {
			ids = append(ids, in.ID)
		}
		t.Fatalf("%d instances in all (%v); the killed driver had rented %v: rented twice", len(insts), ids, rented)
	}
	for _, in := range insts {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after the run", in.ID, in.State)
		}
	}
	rep := readRunReport(t, state)
	if !rep.Finished || rep.Best == nil {
		t.Fatalf("resumed run: finished %v, best %+v", rep.Finished, rep.Best)
	}
	checkRunGroups(t, sim, runIDOf(t, state)) // the resumed driver found the dead one's group
	t.Logf("resumed: %d instances rented in all (%v), best %s", len(insts), rented, rep.Best.Trial)
}

// Fidelity on EC2: the spec's latencies measured where the job runs (`profile --backend ec2`
// rents instances of the fake, whose boot, Nomad join, gang start-up and checkpoint transfers
// are real), then an SHA job at time scale 1 (every second real, as on EC2): its realized cost
// and JCT against the plan's. The goal is 3%; the bound here is looser, for a shared machine
// (make fidelity).
func BenchmarkFidelityEC2(b *testing.B) { fidelityEC2(b) }

func fidelityEC2(t testing.TB) {
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	src, _ := os.ReadFile(specFile)
	text := strings.Replace(string(src), "profile:\n  iter_latency: {1: {mean: 4, std: 0.4}, 2: {mean: 2.2, std: 0.2}, 4: {mean: 1.3, std: 0.1}}",
		"profile:\n  iter_latency: {1: {mean: 1, std: 0.05}, 2: {mean: 0.6, std: 0.03}}", 1)
	text = strings.Replace(text, "algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}",
		"algorithm: {sha: {trials: 8, min_iters: 4, max_iters: 16, eta: 2}}", 1)
	os.WriteFile(specFile, []byte(text), 0o644) // what the synthetic trainer sleeps
	profFile := filepath.Join(dir, "profile.yaml")
	out, errOut, code := rbEnv(t, binary, env, "profile", specFile, "--backend", "ec2", "--gpus", "1,2", "--iters", "4", "--rounds", "2", "--out", profFile)
	if code != 0 {
		t.Fatalf("profile on ec2: exit %d\n%s\n%s", code, errOut, out)
	}
	prof, _ := os.ReadFile(profFile)
	scaleLatency, initLatency := measuredNodeStart(t, prof)
	for _, in := range sim.Instances() {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("profiling left %s %s", in.ID, in.State)
		}
	}
	// The job's spec: the measured profile, and the measured node start-up as the scale and init
	// latencies, split where the bill starts.
	planned := strings.Replace(text, "profile:\n  iter_latency: {1: {mean: 1, std: 0.05}, 2: {mean: 0.6, std: 0.03}}\n  startup_latency: {value: 1s}",
		"profile: {file: "+profFile+"}", 1)
	planned = strings.Replace(planned, "scale_latency: {value: 20s}", "scale_latency: "+scaleLatency, 1)
	planned = strings.Replace(planned, "init_latency: {value: 5s}", "init_latency: "+initLatency, 1)
	plannedFile := filepath.Join(dir, "planned.yaml")
	os.WriteFile(plannedFile, []byte(planned), 0o644)
	plan := planFile(t, dir, plannedFile, "4,4,2")
	state := filepath.Join(dir, "state")
	if out, errOut, code := rbEnv(t, binary, env, "run", plannedFile, "--plan", plan, "--backend", "ec2", "--state", state, "--no-replan"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	rep := readRunReport(t, state)
	costErr, jctErr := format.Pct(rep.Realized.Cost, rep.Predicted.Cost), format.Pct(rep.Realized.JCT, rep.Predicted.JCT)
	t.Logf("profile:\n%s", prof)
	tab := fidelityTable(fmt.Sprintf("ec2 (the wire fake) at time scale 1, the profile measured there, %d instances", len(sim.Instances())),
		"STAGE", "PRED TIME", "TIME", "PRED COST", "COST")
	for i, s := range rep.Stages {
		tab.Row(i+1, format.Clock(s.Predicted.Duration), format.Clock(s.Realized.Duration), fmt.Sprintf("$%.5f", s.Predicted.Cost), fmt.Sprintf("$%.5f", s.Realized.Cost))
	}
	tab.Row("all", format.Clock(rep.Predicted.JCT), format.Clock(rep.Realized.JCT)+fmt.Sprintf(" (%+.1f%%)", jctErr),
		fmt.Sprintf("$%.5f", rep.Predicted.Cost), fmt.Sprintf("$%.5f (%+.1f%%)", rep.Realized.Cost, costErr))
	tab.Flush()
	if math.Abs(costErr) > 25 || math.Abs(jctErr) > 25 {
		t.Fatalf("realized %+.1f%% cost and %+.1f%% JCT off the prediction", costErr, jctErr)
	}
}

// measuredNodeStart is the node start-up a profile file notes, as the values of
// cluster.scale_latency and cluster.init_latency.
func measuredNodeStart(t testing.TB, prof []byte) (scale, init string) {
	t.Helper()
	for _, l := range strings.Split(string(prof), "\n") {
		for field, v := range map[string]*string{profiler.ScaleLatencyField: &scale, profiler.InitLatencyField: &init} {
			if rest, ok := strings.CutPrefix(l, "# "+field+": "); ok {
				value, _, _ := strings.Cut(rest, "}")
				*v = value + "}"
			}
		}
	}
	if scale == "" || init == "" {
		t.Fatalf("the profile does not note the node start-up:\n%s", prof)
	}
	return scale, init
}

// A job on the fake EC2 whose plan changes instance type and market between stages (--no-replan
// keeps the plan's): g3.8xlarge spot (2 GPUs a node), then g3.8xlarge on-demand, then p3.2xlarge
// spot (1 GPU). One provider rents both types; every node comes up as its stage's type and
// market, with that type's GPUs and price in the journal and its type's GPU count in its node
// agent's user-data; the spot nodes are gone before the on-demand ones come, the g3 nodes before
// the p3 ones; the run finishes with the local backend's winner, and every instance is
// terminated at the end.
func TestEC2ChangesInstanceType(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	src, _ := os.ReadFile(specFile)
	typed := strings.Replace(string(src), "  instance_type: g3.8xlarge\n", `  instance_types:
    - {instance_type: g3.8xlarge}
    - {instance_type: p3.2xlarge, spot_price_per_hour: 0.92}
  markets: [on-demand, spot]
`, 1)
	if typed == string(src) {
		t.Fatal("the spec's instance type was not replaced")
	}
	os.WriteFile(specFile, []byte(typed), 0o644)
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4@g3.8xlarge:spot,4@g3.8xlarge:on-demand,2@p3.2xlarge:spot")
	rep := runEC2(t, sim, env, "run", specFile, "--plan", plan, "--no-replan", "--backend", "ec2", "--state", state, "--time-scale", "0.05", "-o", "json")

	type kind struct {
		typ    string
		market cloud.Market
	}
	order := []kind{{"g3.8xlarge", cloud.Spot}, {"g3.8xlarge", cloud.OnDemand}, {"p3.2xlarge", cloud.Spot}}
	gpus := map[string]int{"g3.8xlarge": 2, "p3.2xlarge": 1}
	price := map[kind]float64{order[0]: 0.69, order[1]: 2.28, order[2]: 0.92}
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]kind{}
	rented := map[kind]int{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			k := kind{e.Node.InstanceType, e.Node.Market}
			at := slices.Index(order, k)
			if at < 0 || e.Node.GPUs != gpus[k.typ] || e.Node.PricePerHour != price[k] {
				t.Fatalf("node up %+v: not one of the plan's types and markets with its GPUs and price", e.Node)
			}
			for id, h := range held {
				if slices.Index(order, h) < at {
					t.Fatalf("a %s %s node came up while %s %s node %s was held", k.market, k.typ, h.market, h.typ, id)
				}
			}
			held[e.Node.ID] = k
			rented[k]++
		case journal.EvNodeOff, journal.EvInterrupt:
			for _, id := range e.Nodes {
				delete(held, id)
			}
		}
	}
	if len(rented) != 3 || len(held) != 0 {
		t.Fatalf("rented %v, still held at the end %v; want nodes of each stage's type and market, none left", rented, held)
	}
	for _, in := range sim.Instances() {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s is %s after the run", in.ID, in.State)
		}
		if ud := string(in.UserData); !strings.Contains(ud, fmt.Sprintf(" --gpus %d ", gpus[in.Type])) {
			t.Errorf("%s, a %s, booted with user-data for another GPU count:\n%s", in.ID, in.Type, ud)
		}
	}
	checkRunGroups(t, sim, runIDOf(t, state))
	sameWinnerAsLocal(t, env, rep, specFile, plan, filepath.Join(dir, "local"))
	t.Logf("nodes rented by type and market: %v; cost realized $%.4f, predicted $%.4f", rented, rep.Realized.Cost, rep.Predicted.Cost)
}

// A hedged stage on the fake EC2 (issue 25): the spec offers both markets and the plan puts one
// of stage 0's two instances on demand, the other on spot. The driver asks for each market
// apart (two RunInstances calls, journaled with their markets), journals the on-demand node's
// tier, and places the plan's critical gangs on it. The spot instance is interrupted mid-stage:
// its gangs are relaunched from their checkpoints (on the on-demand room, or a replacement spot
// instance), the on-demand instance is never touched, the run ends with the local backend's
// winner, and every instance is terminated.
func TestEC2HedgedStage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	longerTrials(t, specFile, "  max_nodes: 4\n  markets: [on-demand, spot]\n  spot: {discount: 0.7, interruptions_per_hour: 5}\n")
	state := filepath.Join(dir, "state")
	plan := planFile(t, dir, specFile, "4@:spot+1od,2/2@:spot+1od") // one instance of each market in both stages
	driver := startRun(t, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", state, "--time-scale", "0.1", "--no-replan")
	waitStageReports(t, state, 4)
	markets := map[string]string{}
	var doomed string
	for _, in := range sim.Instances() {
		markets[in.ID] = in.Market
		if in.State == ec2sim.StateRunning && in.Market == ec2sim.MarketSpot {
			if err := sim.Interrupt(in.ID, 4*time.Second); err != nil {
				t.Fatal(err)
			}
			doomed = in.ID
		}
	}
	if len(markets) != 2 || doomed == "" {
		t.Fatalf("instances by market %v at stage 0: want one on demand and one on spot", markets)
	}
	if err := driver.Wait(); !ranToEnd(err) {
		t.Fatalf("run: %v\n%s\nconsoles:\n%s", err, driver.Stdout, consoles(sim))
	}
	rep := readRunReport(t, state)
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	journaled, interruptedTries, _ := checkInterruptions(t, events)
	asked := map[string]bool{}
	tier := map[string]string{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvRequest:
			asked[e.Market] = true
		case journal.EvNodeUp:
			tier[e.Node.ID] = e.Tier
		}
	}
	if !asked[""] || !asked[spec.MarketOnDemand] {
		t.Errorf("requests by market %v: want the stage's own (spot) and on-demand apart", asked)
	}
	for id, market := range markets {
		if (market == ec2sim.MarketOnDemand) != (tier[id] == spec.MarketOnDemand) {
			t.Errorf("%s was rented %s and journaled in tier %q", id, market, tier[id])
		}
		if market == ec2sim.MarketOnDemand && journaled[id] {
			t.Errorf("the on-demand instance %s was journaled interrupted", id)
		}
	}
	if !journaled[doomed] || interruptedTries == 0 || rep.Stages[0].Realized.Done != 4 {
		t.Fatalf("interruption of %s journaled %v, %d interrupted tries; stage 0 %+v", doomed, journaled[doomed], interruptedTries, rep.Stages[0].Realized)
	}
	if rep.Stages[0].Predicted.OnDemandNodes != 1 {
		t.Errorf("the report predicts stage 0 with %d on-demand nodes, want 1", rep.Stages[0].Predicted.OnDemandNodes)
	}
	for _, in := range sim.Instances() {
		if in.State != ec2sim.StateTerminated {
			t.Errorf("%s (%s) is %s after the run", in.ID, in.Market, in.State)
		}
	}
	checkRunGroups(t, sim, runIDOf(t, state))
	sameWinnerAsLocal(t, env, rep, specFile, plan, filepath.Join(dir, "local"))
	t.Logf("%d instance(s) rented (%v), %s interrupted (%d tries relaunched); cost realized $%.4f, predicted $%.4f; JCT realized %.1f s, predicted %.1f s",
		len(sim.Instances()), markets, doomed, interruptedTries, rep.Realized.Cost, rep.Predicted.Cost, rep.Realized.JCT, rep.Predicted.JCT)
}

// waitStageReports waits until each of stage 0's trials (of them) reported twice: every gang,
// not twice as many reports in all (the gangs of an instance that booted first can make them
// all while another instance is still pending, which would leave it nothing to interrupt).
func waitStageReports(t *testing.T, state string, trials int) {
	t.Helper()
	waitFor(t, state, "every gang of stage 0 to report twice", func(j string) bool {
		reports := map[string]int{}
		for _, line := range strings.Split(j, "\n") {
			var e journal.Event
			if json.Unmarshal([]byte(line), &e) == nil && e.Ev == journal.EvReport && e.Stage == 0 {
				reports[e.Trial]++
			}
		}
		for _, n := range reports {
			if n < 2 {
				return false
			}
		}
		return len(reports) == trials
	})
}

// longerTrials rewrites the EC2 spec for a mid-stage interruption: 4 trials of 10 iterations in
// stage 0 (long enough to be caught running), its cluster's max_nodes line replaced by cluster.
func longerTrials(t *testing.T, specFile, cluster string) {
	t.Helper()
	src, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}",
		"algorithm: {sha: {trials: 4, min_iters: 10, max_iters: 20, eta: 2}}", 1)
	if err := os.WriteFile(specFile, []byte(strings.Replace(text, "  max_nodes: 2\n", cluster, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
