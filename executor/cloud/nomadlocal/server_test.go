package nomadlocal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/internal/servers"
)

// A real server: it answers with a leader once StartServer returns, keeps its files in its
// directory, and is gone after Stop.
func TestStartServer(t *testing.T) {
	bin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	dir := t.TempDir()
	s, err := nomadlocal.StartServer(context.Background(), bin, filepath.Join(dir, "server"), nomadlocal.FreePort)
	if err != nil {
		t.Fatal(err)
	}
	defer nomadlocal.UnmountUnder(dir)
	c, err := nomad.NewClient(&nomad.Config{Address: s.Addr})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Status().Leader()
	if err != nil || leader != s.RPC {
		s.Stop()
		t.Fatalf("leader %q (%v), want the server's RPC address %s", leader, err, s.RPC)
	}
	for _, f := range []string{"server.hcl", "server.log", "data"} {
		if _, err := os.Stat(filepath.Join(dir, "server", f)); err != nil {
			t.Error(err)
		}
	}
	if s.Log != filepath.Join(dir, "server", "server.log") {
		t.Errorf("log %s", s.Log)
	}
	s.Stop()
	if _, err := c.Status().Leader(); err == nil {
		t.Fatal("the server still answers after Stop")
	}
}

// A server that never elects a leader is stopped when ctx ends, its whole process group with it,
// and the error says why.
func TestStartServerGivesUpWithItsContext(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-nomad")
	// The fake agent writes its PID beside its configuration ($3) and starts a child that waits.
	script := "#!/bin/sh\necho $$ > \"$(dirname \"$3\")/pid\"\nsleep 60 &\necho $! > \"$(dirname \"$3\")/child\"\nwait\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := nomadlocal.StartServer(ctx, bin, filepath.Join(dir, "server"), nomadlocal.FreePort)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatalf("gave up after %s", time.Since(start))
	}
	for _, f := range []string{"pid", "child"} {
		b, err := os.ReadFile(filepath.Join(dir, "server", f))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d still runs", f, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive says whether pid runs: a zombie (a child whose new parent does not reap it) does not.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}
