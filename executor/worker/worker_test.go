package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/checkpoint/open"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/executor/spotnotice"
)

// runWorker runs a worker of trial t1 in process with a shell script as its trainer, its store
// in store, and returns its exit code and what it printed.
func runWorker(t *testing.T, store string, o Options, script string) (int, string) {
	t.Helper()
	t.Setenv(open.EnvURL, "file://"+store)
	var out bytes.Buffer // the trainer's output and standard error, and the worker's messages, in order
	o.Trial, o.Command, o.Stdout, o.Stderr = "t1", []string{"/bin/sh", "-c", script}, &out, &out
	code := Run(context.Background(), o)
	return code, strings.TrimSpace(out.String())
}

// The workers of a gang restore on their own nodes at their own pace: one that starts after its
// rank 0 has finished and saved restores the version the gang started from, not rank 0's new one
// (it would find the trial at its target and train nothing). A later gang takes the newest.
func TestRestoresWhatItsGangStartedFrom(t *testing.T) {
	store := filepath.Join(t.TempDir(), "checkpoints")
	t.Setenv("RB_TARGET_ITER", "2")
	worker := func(gang string, rank int, script string) string {
		t.Helper()
		code, out := runWorker(t, store, Options{Rank: rank, Gang: gang}, script)
		if code != 0 {
			t.Fatalf("worker %d of %s: exit %d\n%s", rank, gang, code, out)
		}
		return out
	}
	worker("gang-1", 0, `echo 1 > "$RB_CHECKPOINT_DIR/state"`)
	worker("gang-2", 0, `echo 2 > "$RB_CHECKPOINT_DIR/state"`) // gang-2's rank 0 ran ahead and saved
	if got := worker("gang-2", 1, `cat "$RB_CHECKPOINT_DIR/state"`); got != "1" {
		t.Fatalf("rank 1 of gang-2 restored state %q, want 1, what gang-2 started from", got)
	}
	if got := worker("gang-3", 1, `cat "$RB_CHECKPOINT_DIR/state"`); got != "2" {
		t.Fatalf("a later gang restored state %q, want the newest, 2", got)
	}
}

// The worker gives the trainer the GPUs Nomad assigned (NVIDIA_VISIBLE_DEVICES) when the job
// asked for devices, and placement's otherwise.
func TestTakesNomadsGPUs(t *testing.T) {
	store := filepath.Join(t.TempDir(), "checkpoints")
	t.Setenv("RB_TARGET_ITER", "1")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-6b1f,GPU-77aa")
	for _, tc := range []struct {
		devices, want string
	}{{"1", "GPU-6b1f,GPU-77aa"}, {"", "0"}} {
		t.Setenv(GPUDevicesEnv, tc.devices)
		code, out := runWorker(t, store, Options{Rank: 1}, `echo "$CUDA_VISIBLE_DEVICES"`)
		if code != 0 || out != tc.want {
			t.Errorf("%s=%q: exit %d, the trainer saw CUDA_VISIBLE_DEVICES=%q, want %q", GPUDevicesEnv, tc.devices, code, out, tc.want)
		}
	}
}

// Past the launch's deadline the worker stops its trainer by itself, saves what rank 0 reached
// and exits ExitWatchdog; a trainer's own failure is its exit code, with nothing saved.
func TestDeadlineStopsAndSaves(t *testing.T) {
	store := filepath.Join(t.TempDir(), "checkpoints")
	t.Setenv("RB_TARGET_ITER", "9")
	code, out := runWorker(t, store, Options{Rank: 0, Timeout: 100 * time.Millisecond, Grace: 5 * time.Second},
		`echo 5 > "$RB_CHECKPOINT_DIR/state"; exec sleep 30`)
	if code != ExitWatchdog || !strings.Contains(out, "past the launch's deadline of 100ms (checkpoint saved)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if got := restored(t, store); got != "5" {
		t.Fatalf("saved state %q, want 5", got)
	}
	code, out = runWorker(t, store, Options{Rank: 0}, `echo 6 > "$RB_CHECKPOINT_DIR/state"; exit 3`)
	if code != 3 || restored(t, store) != "5" {
		t.Fatalf("a failed trainer: exit %d, state %q:\n%s", code, restored(t, store), out)
	}
}

func restored(t *testing.T, root string) string {
	t.Helper()
	s, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, ok, err := checkpoint.RestoreDir(context.Background(), s, "t1", dir); err != nil || !ok {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state"))
	return strings.TrimSpace(string(b))
}

// What a runtime writes with Args, the worker reads with ParseArgs; a bad command line is
// ErrUsage.
func TestArgs(t *testing.T) {
	o := Options{Trial: "b0-t0001", Rank: 2, Gang: "rb-r1-b0-t0001-3", Grace: 10 * time.Second, RunID: "r1", HeartbeatTimeout: time.Minute,
		Timeout: 5 * time.Minute, SpotNotices: true, Node: "i-0abc", Lead: 3 * time.Second, SpotPoll: 2 * time.Second, Command: []string{"python", "train.py", "--lr", "0.1"}}
	got, err := ParseArgs(o.Args(), io.Discard)
	if err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("round trip: %+v, %v\nwant %+v", got, err, o)
	}
	for _, args := range [][]string{{"--rank", "0", "--", "x"}, {"--trial", "t", "--", "x"}, {"--trial", "t", "--rank", "0"}, {"--bogus"}} {
		if _, err := ParseArgs(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// A worker on a spot node told of its interruption with a run and a node to give it for trains
// through the notice: the driver is told (the notice's object in the store), the trainer trains
// on, and it is stopped, its checkpoint saved, its grace and NoticeLead before EC2 acts; the
// exit says the node is going. A notice already past stops it at once.
func TestTrainsThroughTheNotice(t *testing.T) {
	store := filepath.Join(t.TempDir(), "checkpoints")
	t.Setenv("RB_TARGET_ITER", "9")
	const grace = 200 * time.Millisecond
	acts := time.Now().Add(grace + NoticeLead + time.Second) // it trains on about a second
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			w.Write([]byte("token"))
		case r.URL.Path == "/latest/meta-data/spot/instance-action":
			fmt.Fprintf(w, `{"action":"terminate","time":%q}`, acts.UTC().Format(time.RFC3339Nano))
		default:
			http.NotFound(w, r)
		}
	}))
	defer imds.Close()
	o := Options{Rank: 0, RunID: "r1", Node: "i-0abc", SpotNotices: true, SpotPoll: 10 * time.Millisecond, IMDSEndpoint: imds.URL, Grace: grace}
	// The trainer counts, a state every 0.1 s, and checkpoints (its state file) as it goes.
	code, out := runWorker(t, store, o, `i=0; while true; do i=$((i+1)); echo $i > "$RB_CHECKPOINT_DIR/state"; sleep 0.1; done`)
	if code != ExitInterrupted || !strings.Contains(out, "the driver is told") {
		t.Fatalf("exit %d, want %d (interrupted), the driver told:\n%s", code, ExitInterrupted, out)
	}
	st, _ := file.New(store)
	r, _, err := st.Open(context.Background(), spotnotice.Prefix("r1")+"i-0abc")
	if err != nil {
		t.Fatalf("the notice given to the driver: %v", err)
	}
	r.Close()
	if n, _ := strconv.Atoi(restored(t, store)); n < 3 {
		t.Fatalf("saved state %d: the trainer did not train on through the notice", n)
	}
	if on := trainOn(nodeagent.Notice{Time: time.Now().Add(-time.Second).Format(time.RFC3339)}, time.Now(), grace+NoticeLead); on != 0 {
		t.Fatalf("a notice already past trains on for %s", on)
	}
	if on := trainOn(nodeagent.Notice{Time: "soon"}, time.Now(), grace+NoticeLead); on != 0 {
		t.Fatalf("a notice without a time trains on for %s", on)
	}
}
