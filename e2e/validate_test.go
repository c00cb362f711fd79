package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
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
	t.Parallel()
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
	if last := lines[len(want)]; last != "rubberband: "+file+": 13 problems" {
		t.Errorf("summary %q", last)
	}
}

// validate refuses at once, by name, what is not a regular file: /dev/zero would be read forever
// and a FIFO's open would block.
func TestValidateRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "spec.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "rubberband: read spec: /dev/zero is a character device, not a regular file\n"},
		{fifo, "rubberband: read spec: " + fifo + " is a named pipe (FIFO), not a regular file\n"},
	} {
		refusedAtOnce(t, tc.want, "validate", tc.path)
	}
}

// refusedAtOnce runs the CLI with args, killed after 30 s, and wants it to exit 2 within 10 s
// saying want on standard error: a command that reads what it must not would hang or take long.
func refusedAtOnce(t *testing.T, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	if took := time.Since(start); !errors.As(err, &ee) || ee.ExitCode() != 2 || stderr.String() != want || took > 10*time.Second {
		t.Errorf("%v: %v after %v, stderr %q", args, err, took.Round(time.Millisecond), stderr.String())
	}
}

// simulate --plan and run --plan read the plan file only when it is a regular file of at most
// 4 MiB, and say so by name at once: a FIFO's open blocked forever, and a 200 MB file was read
// whole into memory (683 MB RSS).
func TestPlanFileIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plan.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if f, err := os.Create(huge); err == nil {
		f.Truncate(200 << 20) // sparse: no disk used
		f.Close()
	}
	for _, tc := range []struct{ cmd, path, want string }{
		{"simulate", fifo, "rubberband: read plan: " + fifo + " is a named pipe (FIFO), not a regular file\n"},
		{"simulate", "/dev/zero", "rubberband: read plan: /dev/zero is a character device, not a regular file\n"},
		{"simulate", huge, "rubberband: read plan: " + huge + " is 209715200 bytes, above the limit of 4194304 bytes (4 MiB) for a plan file\n"},
		{"run", fifo, "rubberband: read plan: " + fifo + " is a named pipe (FIFO), not a regular file\n"},
	} {
		args := []string{tc.cmd, "examples/quickstart.yaml", "--plan", tc.path}
		if tc.cmd == "run" {
			args = append(args, "--state", filepath.Join(dir, "state"))
		}
		refusedAtOnce(t, tc.want, args...)
	}
}
