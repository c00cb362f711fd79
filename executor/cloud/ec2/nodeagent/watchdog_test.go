package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
)

// fakeNomad is a "Nomad agent" that writes its PID and sleeps; shutdown is a command that
// leaves a marker.
func fakeNomad(t *testing.T, dir, body string) (argv, shutdown []string) {
	t.Helper()
	nomad := filepath.Join(dir, "nomad")
	os.WriteFile(nomad, []byte("#!/bin/sh\necho $$ > "+filepath.Join(dir, "pid")+"\n"+body+"\n"), 0o755)
	return []string{nomad, "agent"}, []string{"touch", filepath.Join(dir, "shut-down")}
}

// sleepingNomad is a fakeNomad that sleeps; started returns once it runs (it opens a FIFO the
// test reads: no wall-clock wait).
func sleepingNomad(t *testing.T, dir string) (argv, shutdown []string, started func()) {
	t.Helper()
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	argv, shutdown = fakeNomad(t, dir, "echo > "+fifo+"\nexec sleep 300")
	return argv, shutdown, func() {
		if _, err := os.ReadFile(fifo); err != nil {
			t.Fatal(err)
		}
	}
}

func shutDown(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "shut-down"))
	return err == nil
}

func agentAlive(t *testing.T, dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && syscall.Kill(pid, 0) == nil
}

// steppedClock is the watchdog's time, moved by the test: each Sleep waits for a step, which
// moves Now on by what it slept.
type steppedClock struct {
	mu   sync.Mutex
	now  time.Time
	step chan struct{}
}

var _ clock.Clock = (*steppedClock)(nil)

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-c.step:
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *steppedClock) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }
func (c *steppedClock) Go(_ string, f func())                           { go f() }

// While the driver beats the instance lives; once the beat stops for the watchdog's time, the
// agent stops Nomad and powers the instance off. The agent's process and the store are real; the
// watchdog's clock is stepped by the test, a poll (a quarter of the watchdog) a step, the driver's
// beat written before each step while it beats.
func TestWatchdogShutsDownWithoutHeartbeat(t *testing.T) {
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	argv, shutdown, started := sleepingNomad(t, dir)
	const watchdog, poll = time.Second, 250 * time.Millisecond
	clk := &steppedClock{now: time.Unix(0, 0), step: make(chan struct{})}
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Supervise(t.Context(), Options{Heartbeat: store, RunID: "r1", Watchdog: watchdog, Shutdown: shutdown, Clock: clk}, argv, &log)
	}()
	started()
	for n := range 5 * int(watchdog/poll) { // five watchdogs' time, beating
		if _, err := store.Put(t.Context(), heartbeat.Key("r1"), strings.NewReader(strconv.Itoa(n))); err != nil {
			t.Fatal(err)
		}
		select {
		case clk.step <- struct{}{}:
		case err := <-done:
			t.Fatalf("the agent gave up while the driver beat (step %d): %v\n%s", n, err, log.String())
		}
	}
	if shutDown(dir) || !agentAlive(t, dir) {
		t.Fatal("the instance was shut down while its driver beat")
	}
	steps := 0 // the beat stops
	for stepping := true; stepping; {
		select {
		case clk.step <- struct{}{}:
			steps++
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			stepping = false
		}
	}
	if !shutDown(dir) {
		t.Fatal("no shutdown after the heartbeat stopped")
	}
	if agentAlive(t, dir) {
		t.Fatal("the Nomad agent outlived the shutdown")
	}
	// The beat last seen at most a poll before it stopped: the watchdog's time, give or take it.
	if took := time.Duration(steps) * poll; took < watchdog-poll || took > watchdog+poll {
		t.Fatalf("shut down %s of the watchdog's clock after the last beat, watchdog %s", took, watchdog)
	}
	if !strings.Contains(log.String(), "no heartbeat from the driver of run r1") {
		t.Fatalf("log does not say why:\n%s", log.String())
	}
}

// A node whose Nomad agent died cannot run anything: it powers off rather than bill.
func TestWatchdogShutsDownWhenNomadExits(t *testing.T) {
	dir := t.TempDir()
	store, _ := file.New(filepath.Join(dir, "store"))
	argv, shutdown := fakeNomad(t, dir, "exit 3")
	var log bytes.Buffer
	if err := Supervise(t.Context(), Options{Heartbeat: store, RunID: "r1", Watchdog: time.Hour, Shutdown: shutdown}, argv, &log); err != nil {
		t.Fatal(err)
	}
	if !shutDown(dir) || !strings.Contains(log.String(), "the Nomad agent exited (exit status 3)") {
		t.Fatalf("shut down %v; log:\n%s", shutDown(dir), log.String())
	}
}

// When the instance itself shuts down (the agent's context ends), the agent stops Nomad and
// runs no shutdown of its own.
func TestWatchdogStopsWithTheInstance(t *testing.T) {
	dir := t.TempDir()
	store, _ := file.New(filepath.Join(dir, "store"))
	argv, shutdown, started := sleepingNomad(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Supervise(ctx, Options{Heartbeat: store, RunID: "r1", Watchdog: time.Hour, Shutdown: shutdown}, argv, &bytes.Buffer{})
	}()
	started()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Supervise = %v, want the context's end", err)
	}
	if shutDown(dir) || agentAlive(t, dir) {
		t.Fatalf("shut down %v, agent alive %v", shutDown(dir), agentAlive(t, dir))
	}
}

// With a run and a watchdog the script exports the store's address (quoted) and passes both to
// the agent; a malformed variable is refused.
func TestScriptWithWatchdog(t *testing.T) {
	c := ScriptConfig{Server: "10.0.0.5:4647", RunID: "r20260101-000000-0000abcd", Watchdog: 15 * time.Minute,
		StoreEnv: []string{"RB_CHECKPOINTS=s3://bucket/exp a", "RB_CHECKPOINTS_ENDPOINT="}, Shutdown: "true"}
	s, err := Script(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"export RB_CHECKPOINTS='s3://bucket/exp a'\n", "export RB_CHECKPOINTS_ENDPOINT=''\n",
		"--run r20260101-000000-0000abcd --watchdog 15m0s --shutdown-command true\n"} {
		if !strings.Contains(s, want) {
			t.Fatalf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "export") > strings.Index(s, "exec ") {
		t.Fatalf("the environment comes after the agent:\n%s", s)
	}
	c.StoreEnv = []string{"BAD KEY=x"}
	if _, err := Script(c); err == nil {
		t.Fatal("a malformed variable was accepted")
	}
}
