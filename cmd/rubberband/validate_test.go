package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// validate lists every problem of a spec in one pass, in line order, each as FILE:LINE: path:
// message, and exits 2: a type error, an unknown field and a duplicate key hide none of the ten
// invalid values.
func TestValidateReportsEveryProblem(t *testing.T) {
	const file = "spec/testdata/invalid/every-problem.yaml"
	_, errOut, code := rb(t, "validate", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, errOut)
	}
	want := []string{
		"3: name: is 71 characters long (at most 63",
		"4: deadline: 9000h0m0s is out of range",
		`5: objective.mode: "up" is not a mode`,
		"7: algorithm.sha.trials: 0 is out of range",
		`9: search_space.lr.type: "gaussian" is not a parameter type`,
		"12: trainer.env.MY VAR: not a valid environment variable name",
		`14: cluster.gpus_per_node: "two" is not an integer`,
		"15: cluster.price_per_hour: 1e+308 is out of range",
		"16: cluster.colour: unknown field",
		"18: cluster.max_nodes: given twice",
		"19: cluster.network_gbps: 1e+06 is out of range",
		"20: cluster.data.price_per_gb: 1e+09 is out of range",
		"24: planner.samples: 0 is out of range",
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != len(want)+1 {
		t.Fatalf("%d lines, want %d problems and a summary:\n%s", len(lines), len(want), errOut)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], file+":"+w) {
			t.Errorf("line %d is %q, want %s:%s...", i+1, lines[i], file, w)
		}
	}
	if last := lines[len(want)]; last != "rubberband: "+file+": 13 problem(s)" {
		t.Errorf("summary %q", last)
	}
}

// validate refuses at once, by name, what is not a regular file: /dev/zero would be read forever
// and a FIFO's open would block.
func TestValidateRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "spec.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "rubberband: read spec: /dev/zero is a character device, not a regular file\n"},
		{fifo, "rubberband: read spec: " + fifo + " is a named pipe (FIFO), not a regular file\n"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, "validate", tc.path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		took := time.Since(start)
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || stderr.String() != tc.want || took > 10*time.Second {
			t.Errorf("%s: %v after %v, stderr %q", tc.path, err, took.Round(time.Millisecond), stderr.String())
		}
	}
}
