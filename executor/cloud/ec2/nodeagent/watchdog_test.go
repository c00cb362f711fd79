package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
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

func shutDown(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "shut-down"))
	return err == nil
}

func agentAlive(t *testing.T, dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && syscall.Kill(pid, 0) == nil
}

// While the driver beats the instance lives; once the beat stops for the watchdog's time, the
// agent stops Nomad and powers the instance off. The agent's own process and the store are
// real, so the times are wall time: a watchdog of 2 s against beats every 50 ms leaves a
// machine under make test's load (a file store's writes taking half a second) its margin.
func TestWatchdogShutsDownWithoutHeartbeat(t *testing.T) {
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	argv, shutdown := fakeNomad(t, dir, "exec sleep 300")
	beat, stopBeat := context.WithCancel(t.Context())
	go heartbeat.Beat(beat, nil, store, "r1", 50*time.Millisecond, nil)
	var log bytes.Buffer
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Supervise(t.Context(), Options{Heartbeat: store, RunID: "r1", Watchdog: 2 * time.Second, Shutdown: shutdown}, argv, &log)
	}()
	select {
	case err := <-done:
		t.Fatalf("the agent gave up while the driver beat: %v\n%s", err, log.String())
	case <-time.After(3 * time.Second):
	}
	if shutDown(dir) || !agentAlive(t, dir) {
		t.Fatal("the instance was shut down while its driver beat")
	}
	stopBeat()
	stopped := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !shutDown(dir) {
		t.Fatal("no shutdown after the heartbeat stopped")
	}
	if agentAlive(t, dir) {
		t.Fatal("the Nomad agent outlived the shutdown")
	}
	if took := time.Since(stopped); took < 1600*time.Millisecond || took > 10*time.Second {
		t.Fatalf("shut down %s after the last beat, watchdog 2s", took)
	}
	if !strings.Contains(log.String(), "no heartbeat from the driver of run r1") {
		t.Fatalf("log does not say why:\n%s", log.String())
	}
	t.Logf("lived %s, shut down %s after the beat stopped", time.Since(start).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
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
	argv, shutdown := fakeNomad(t, dir, "exec sleep 300")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Supervise(ctx, Options{Heartbeat: store, RunID: "r1", Watchdog: time.Hour, Shutdown: shutdown}, argv, &bytes.Buffer{})
	}()
	for deadline := time.Now().Add(5 * time.Second); !agentAlive(t, dir); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fake agent never started")
		}
	}
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
