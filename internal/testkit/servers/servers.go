package servers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// Binary returns the path of a server binary built by `make deps` (or named by the environment
// variable env), skipping the test — failing it under CI — when there is none.
func Binary(t testing.TB, name, env string) string {
	t.Helper()
	if p := binaryPath(name, env); p != "" {
		return p
	}
	msg := fmt.Sprintf("no %s binary: run `make deps` (or set %s)", name, env)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "tools")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no module root above %s", dir)
		}
		dir = parent
	}
}

// FreePort returns a loopback port nobody listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := nomadlocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitTCP waits until something accepts connections at addr.
func waitTCP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens at %s after %v", addr, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopGroup sends SIGTERM to a process group and SIGKILL after grace, and waits for the process.
func stopGroup(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
