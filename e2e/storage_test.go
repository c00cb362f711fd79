package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// Checkpoint stores never mix runs (issue 36, H3): each run keeps its keys under its own prefix
// of the spec's checkpoints.url and claims it.

// storeSpec writes the synthetic job into its own folder under dir, with seed and, when url is
// not empty, its checkpoints there.
func storeSpec(t *testing.T, dir, name string, seed int, url string) string {
	t.Helper()
	sub := filepath.Join(dir, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return trialSpec(t, sub, func(s string) string {
		s = strings.Replace(s, "seed: 11", fmt.Sprintf("seed: %d", seed), 1)
		if url != "" {
			s += "checkpoints: {url: " + url + "}\n"
		}
		return s
	})
}

// results are a run's journaled results: each trial's metric at each iteration it reported.
func results(t *testing.T, state string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, e := range readJournal(t, state) {
		if e.Ev == journal.EvDone && e.Metric != nil {
			out[fmt.Sprintf("%s@%d", e.Trial, e.Iter)] = *e.Metric
		}
	}
	return out
}

// The same job run again, reseeded, on the checkpoint URL of a run before it: its trials are
// its own, so its results, and its winner, are a clean run's. Before, keys were
// trials/<trial-id>/… at the URL's root and trial IDs repeat in every run: the second run found
// the first run's checkpoints at their targets and re-reported them for its own parameters
// (b0-t0009 at 0.8255, the first run's, where a clean run picks b0-t0003 at 0.8324).
func TestSecondRunOnOneCheckpointURL(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	url := "file://" + filepath.Join(tmp, "store")
	first, second, clean := storeSpec(t, tmp, "first", 11, url), storeSpec(t, tmp, "second", 12, url), storeSpec(t, tmp, "clean", 12, "")
	var wg sync.WaitGroup
	for name, spec := range map[string]string{"first": first, "clean": clean} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, errOut, code := rb(t, "run", spec, "--state", filepath.Join(tmp, name+"-state"), "--time-scale", "0.01"); code != 0 {
				t.Errorf("%s run: %s", name, errOut)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	state := filepath.Join(tmp, "second-state")
	if _, errOut, code := rb(t, "run", second, "--state", state, "--time-scale", "0.01"); code != 0 {
		t.Fatalf("second run: %s", errOut)
	}
	got, want := readRunReport(t, state), readRunReport(t, filepath.Join(tmp, "clean-state"))
	if got.Best == nil || want.Best == nil || got.Best.Trial != want.Best.Trial || got.Best.Metric != want.Best.Metric {
		t.Fatalf("the second run on the URL picks %+v; a clean run %+v", got.Best, want.Best)
	}
	sameResults(t, results(t, state), results(t, filepath.Join(tmp, "clean-state")))
	logs, _ := filepath.Glob(filepath.Join(state, rundir.LogsDir, "*"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "re-reporting") {
			t.Errorf("%s re-reports a checkpoint it did not make:\n%s", filepath.Base(l), b)
		}
	}
}

// A run's prefix that holds another run's marker, or keys of no run, is refused when the run
// resumes, with the URL and the other run named and nothing run; with its own marker back it
// resumes from its own checkpoints to a clean run's winner.
func TestForeignCheckpointPrefixIsRefused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	storeDir := filepath.Join(tmp, "store")
	url := "file://" + storeDir
	spec, clean := storeSpec(t, tmp, "run", 11, url), storeSpec(t, tmp, "clean", 11, "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, errOut, code := rb(t, "run", clean, "--state", filepath.Join(tmp, "clean-state"), "--time-scale", "0.01"); code != 0 {
			t.Errorf("clean run: %s", errOut)
		}
	}()
	defer func() { <-done }() // t is not used once the test has returned
	state := filepath.Join(tmp, "state")
	driver := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.01")
	waitFor(t, state, "the first sync", func(j string) bool { return strings.Contains(j, `"ev":"sync"`) })
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()

	var rf rundir.RunFile
	if b, err := os.ReadFile(filepath.Join(state, rundir.RunJSON)); err != nil || json.Unmarshal(b, &rf) != nil {
		t.Fatalf("run.json: %v", err)
	}
	if rf.CheckpointLayout != checkpoint.LayoutPerRun {
		t.Fatalf("run.json records layout %q", rf.CheckpointLayout)
	}
	ctx := context.Background()
	root, err := file.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "runs/" + rf.RunID + "/"
	saved, _ := root.List(ctx, prefix+"trials/")
	if shared, _ := root.List(ctx, "trials/"); len(saved) == 0 || len(shared) != 0 {
		t.Fatalf("%d keys under the run's prefix, %d at the URL's root", len(saved), len(shared))
	}
	marker := func(runID string) {
		t.Helper()
		b, _ := json.Marshal(checkpoint.Owner{RunID: runID, Experiment: "theirs"})
		if _, err := root.Put(ctx, prefix+checkpoint.OwnerKey, strings.NewReader(string(b))); err != nil {
			t.Fatal(err)
		}
	}
	journal, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
	marker("r-intruder")
	if _, errOut, code := rb(t, "resume", state); code == 0 || !strings.Contains(errOut, url) || !strings.Contains(errOut, "r-intruder") {
		t.Fatalf("resume on a prefix another run claimed: exit %d: %s", code, errOut)
	}
	if err := root.Delete(ctx, prefix+checkpoint.OwnerKey); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "resume", state); code == 0 || !strings.Contains(errOut, url) || !strings.Contains(errOut, "no owner.json") {
		t.Fatalf("resume on a prefix of keys without a marker: exit %d: %s", code, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(state, rundir.Journal)); !strings.HasPrefix(string(after), string(journal)) || strings.Contains(string(after[len(journal):]), `"ev":"launch"`) {
		t.Fatal("a refused resume launched trials")
	}
	if again, _ := root.List(ctx, prefix+"trials/"); len(again) != len(saved) {
		t.Fatalf("the refused resumes changed the checkpoints: %d keys, were %d", len(again), len(saved))
	}
	marker(rf.RunID)
	if _, errOut, code := rb(t, "resume", state); !finishedCode(code) {
		t.Fatalf("resume on its own prefix: exit %d: %s", code, errOut)
	}
	<-done
	got, want := readRunReport(t, state), readRunReport(t, filepath.Join(tmp, "clean-state"))
	if got.Best == nil || want.Best == nil || got.Best.Trial != want.Best.Trial || got.Best.Metric != want.Best.Metric {
		t.Fatalf("the resumed run picks %+v; a clean run %+v", got.Best, want.Best)
	}
	sameResults(t, results(t, state), results(t, filepath.Join(tmp, "clean-state")))
	// Its trials went on from their checkpoints: the first stage (iteration 1), done before the
	// kill, is trained once; a trial that lost its checkpoint would train it again.
	logs, _ := filepath.Glob(filepath.Join(state, rundir.LogsDir, "*"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Count(string(b), `{"iter":1,`) > 1 {
			t.Errorf("%s trains iteration 1 again after the resume:\n%s", filepath.Base(l), b)
		}
	}
}

// sameResults fails the test where got's results are not a clean run's.
func sameResults(t *testing.T, got, clean map[string]float64) {
	t.Helper()
	if len(got) != len(clean) {
		t.Fatalf("%d results; a clean run's %d", len(got), len(clean))
	}
	for k, v := range clean {
		if got[k] != v {
			t.Errorf("%s: %v; a clean run's %v", k, got[k], v)
		}
	}
}

// A run an older binary made keeps its keys at the URL's root, and its run.json names no
// layout: resumed by this binary, it reads them there (its trials go on from their checkpoints)
// and claims no prefix.
func TestOlderRunResumesWithItsKeys(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	storeDir := filepath.Join(tmp, "store")
	spec := storeSpec(t, tmp, "run", 11, "file://"+storeDir)
	state := filepath.Join(tmp, "state")
	driver := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.01")
	waitFor(t, state, "the first sync", func(j string) bool { return strings.Contains(j, `"ev":"sync"`) })
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()

	// The run as an older binary left it: run.json without checkpoint_layout, the keys at the root.
	runJSON := filepath.Join(state, rundir.RunJSON)
	b, err := os.ReadFile(runJSON)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	runID, _ := fields["run_id"].(string)
	delete(fields, "checkpoint_layout")
	if b, err = json.Marshal(fields); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runJSON, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root, err := file.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "runs/" + runID + "/"
	saved, _ := root.List(ctx, prefix+"trials/")
	if len(saved) == 0 {
		t.Fatal("no checkpoints saved before the kill")
	}
	for _, info := range saved {
		rc, _, err := root.Open(ctx, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = root.Put(ctx, strings.TrimPrefix(info.Key, prefix), rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(storeDir, "runs")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "resume", state); !finishedCode(code) {
		t.Fatalf("resume of an older binary's run: exit %d: %s", code, errOut)
	}
	if rep := readRunReport(t, state); !rep.Finished || rep.Best == nil {
		t.Fatalf("report %+v", rep)
	}
	logs, _ := filepath.Glob(filepath.Join(state, rundir.LogsDir, "*"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Count(string(b), `{"iter":1,`) > 1 {
			t.Errorf("%s trains iteration 1 again: its checkpoint at the root was not read:\n%s", filepath.Base(l), b)
		}
	}
	if runs, _ := root.List(ctx, "runs/"); len(runs) != 0 {
		t.Fatalf("the older run wrote under runs/: %+v", runs)
	}
}
