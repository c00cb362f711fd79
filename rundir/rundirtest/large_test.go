package rundirtest_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// A large run's folder is one rundir reads: its plan fits its spec, and its journal replays to
// the finished run it says.
func TestLargeIsARunFolder(t *testing.T) {
	dir, err := rundirtest.Large(t.TempDir(), "large", 81, 81, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rundir.NewView(st)
	if err != nil {
		t.Fatal(err)
	}
	if word, why := v.Status(); word != "finished" {
		t.Errorf("status %q (%s); want finished", word, why)
	}
	if synced, of := v.Stages(); synced != of || of != 5 {
		t.Errorf("%d of %d stages synced; want 5 of 5", synced, of)
	}
}

// TestWriteLargeRun writes a large run's folder for measuring the CLI on it, when
// RB_LARGE_RUN names the folder's root (RB_LARGE_TRIALS trials, default 100,000):
//
//	RB_LARGE_RUN=/tmp/root go test ./rundir/rundirtest -run TestWriteLargeRun
func TestWriteLargeRun(t *testing.T) {
	root := os.Getenv("RB_LARGE_RUN")
	if root == "" {
		t.Skip("RB_LARGE_RUN is not set")
	}
	trials := 100_000
	if n, err := strconv.Atoi(os.Getenv("RB_LARGE_TRIALS")); err == nil {
		trials = n
	}
	dir, err := rundirtest.Large(root, "large"+strconv.Itoa(trials), trials, 729, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(dir)
}
