package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
)

// teamML is a SQLite store in dir with team ml, whose checkpoints may go to dir/ckpt.
func teamML(t *testing.T, dir string) *sqlstore.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite:"+filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, store.Team{Name: "ml", StoragePrefixes: []string{"file://" + filepath.Join(dir, "ckpt")}}); err != nil {
		t.Fatal(err)
	}
	return st
}

// chargeHook is a store that calls hook once, at the first ChargeRun of run id after armed is
// set: in ended, before the run's end is recorded.
type chargeHook struct {
	store.Store
	mu    sync.Mutex
	armed bool
	hook  func()
}

func (c *chargeHook) ChargeRun(ctx context.Context, id string, cost float64, month string) (float64, error) {
	c.mu.Lock()
	hook := c.hook
	if !c.armed {
		hook = nil
	}
	c.armed = false
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return c.Store.ChargeRun(ctx, id, cost, month)
}

// A step that comes while a run's driver has ended but before its end is recorded (the run
// still running in the store) must not start a second driver: the second one's start ends the
// sandbox's processes, and once the run is resumed they are its new driver's trainers (a try
// "signal: killed" 46 ms after its launch, in TestServerPausesOnFullDisk under load).
func TestNoSecondDriverBeforeTheEndIsRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := teamML(t, dir)
	// The driver: it counts its starts and dies at once (the run ends interrupted, after one
	// restart).
	starts := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "driver.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" >> "+starts+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hooked := &chargeHook{Store: db}
	sup := &Supervisor{Binary: script, MaxRestarts: 1, Backoff: time.Millisecond}
	s := New(Config{Store: hooked, Root: filepath.Join(dir, "root"), Backend: "local", Holder: "test", Supervisor: sup})
	src, err := os.ReadFile("../e2e/testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(src) + "checkpoints: {url: 'file://" + filepath.Join(dir, "ckpt") + "'}\n"
	run, _, err := s.Submit(ctx, store.User{Name: "alice", Team: "ml"}, Submission{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	// At the end's charge: is the run still its first driver's, and does a step leave it so?
	type seen struct {
		before, after *driving
		err           error
	}
	stepped := make(chan seen, 1)
	hooked.hook = func() {
		var v seen
		s.mu.Lock()
		v.before = s.drivers[run.ID]
		s.mu.Unlock()
		v.err = s.step(ctx)
		s.mu.Lock()
		v.after = s.drivers[run.ID]
		s.mu.Unlock()
		stepped <- v
	}
	hooked.armed = true // the first charge is ended's: step holds no lease yet, charges nothing
	if err := s.step(ctx); err != nil {
		t.Fatal(err)
	}
	v := <-stepped // the test's own timeout bounds it
	if v.err != nil {
		t.Fatal(v.err)
	}
	if v.before == nil || v.after != v.before {
		t.Fatalf("at the end's record the run's driver was %p, after a step %p: a second driver started", v.before, v.after)
	}
	b, _ := os.ReadFile(starts)
	if n := strings.Count(string(b), "\n"); n != 2 { // the first start and its one restart
		t.Fatalf("%d driver starts, want 2 (one driver, restarted once):\n%s", n, b)
	}
}
