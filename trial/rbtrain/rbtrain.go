// Package rbtrain is the trainer side of rubberband's trainer contract, for trainers written in
// Go: read the environment a worker is given, report progress, write checkpoints atomically and
// notice SIGTERM.
package rbtrain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rubberband-hpo/rubberband/trial"
)

// Run is one TRAIN run of one worker, as the environment describes it.
type Run struct {
	TrialID, Experiment   string
	StartIter, TargetIter int
	CheckpointDir         string
	Rank, WorldSize       int
	LocalRank             int
	MasterAddr            string
	MasterPort            int
	GPUs                  []int

	params json.RawMessage
	out    io.Writer
	term   chan struct{}
}

// Serve runs train for the trial the environment describes and, when the runtime reuses this
// process (trial.ReuseVar), for every further trial it assigns on standard input: between trials
// it prints the end line and reads the next assignment into the environment. It returns when the
// input ends (nil), after a run that SIGTERM stopped (that run's result), or at the first error:
// what the trainer should exit with.
func Serve(train func(*Run) error) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	defer signal.Stop(sig)
	reuse := os.Getenv(trial.ReuseVar) == "1"
	in := bufio.NewReader(os.Stdin)
	for {
		r, err := Parse(os.Getenv, os.Stdout)
		if err != nil {
			return err
		}
		ran := make(chan struct{})
		terminated := make(chan struct{})
		go func() {
			select {
			case <-sig:
				close(r.term)
				close(terminated)
			case <-ran:
			}
		}()
		err = train(r)
		close(ran)
		if !reuse {
			return err
		}
		code := trial.ExitReached
		if err != nil {
			fmt.Fprintf(os.Stderr, "rbtrain: trial %s: %v\n", r.TrialID, err)
			code = 1
		}
		fmt.Fprintln(os.Stdout, trial.EndPrefix+strconv.Itoa(code))
		select {
		case <-terminated:
			return err
		default:
		}
		if err != nil {
			return err
		}
		if err := nextAssignment(in); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// nextAssignment reads one assignment line into the environment; io.EOF at the end of the input.
func nextAssignment(in *bufio.Reader) error {
	line, err := in.ReadBytes('\n')
	if len(bytes.TrimSpace(line)) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("rbtrain: read the next trial: %w", err)
	}
	var vars map[string]string
	if err := json.Unmarshal(line, &vars); err != nil {
		return fmt.Errorf("rbtrain: the next trial: %w", err)
	}
	for k, v := range vars {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("rbtrain: the next trial: %w", err)
		}
	}
	return nil
}

// Parse reads a worker's environment through getenv; reports go to out.
func Parse(getenv func(string) string, out io.Writer) (*Run, error) {
	r := &Run{TrialID: getenv("RB_TRIAL_ID"), Experiment: getenv("RB_EXPERIMENT"), CheckpointDir: getenv("RB_CHECKPOINT_DIR"),
		MasterAddr: getenv("MASTER_ADDR"), params: json.RawMessage(getenv("RB_PARAMS")), out: out, term: make(chan struct{})}
	if r.TrialID == "" {
		return nil, fmt.Errorf("rbtrain: RB_TRIAL_ID is not set: run me through rubberband")
	}
	ints := []struct {
		name string
		v    *int
	}{{"RB_START_ITER", &r.StartIter}, {"RB_TARGET_ITER", &r.TargetIter}, {"RANK", &r.Rank}, {"WORLD_SIZE", &r.WorldSize},
		{"LOCAL_RANK", &r.LocalRank}, {"MASTER_PORT", &r.MasterPort}}
	for _, f := range ints {
		n, err := strconv.Atoi(getenv(f.name))
		if err != nil {
			return nil, fmt.Errorf("rbtrain: %s=%q is not a number", f.name, getenv(f.name))
		}
		*f.v = n
	}
	for _, g := range strings.Split(getenv("RB_GPUS"), ",") {
		if n, err := strconv.Atoi(g); err == nil {
			r.GPUs = append(r.GPUs, n)
		}
	}
	if len(r.params) == 0 {
		r.params = json.RawMessage("{}")
	}
	return r, nil
}

// Params decodes the trial's hyperparameters into v.
func (r *Run) Params(v any) error {
	if err := json.Unmarshal(r.params, v); err != nil {
		return fmt.Errorf("rbtrain: decode RB_PARAMS: %w", err)
	}
	return nil
}

// Report prints a progress report; only rank 0 reports, other ranks' calls do nothing.
func (r *Run) Report(iter int, metrics map[string]float64) {
	if r.Rank == 0 {
		fmt.Fprintln(r.out, trial.FormatReport(iter, metrics))
	}
}

// Terminated is closed when the worker receives SIGTERM: write a checkpoint and exit within
// trial.GracePeriod.
func (r *Run) Terminated() <-chan struct{} { return r.term }

// WriteCheckpoint writes one checkpoint file atomically: to a temporary file, synced, renamed.
func (r *Run) WriteCheckpoint(name string, data []byte) error {
	if err := os.MkdirAll(r.CheckpointDir, 0o755); err != nil {
		return fmt.Errorf("rbtrain: checkpoint dir: %w", err)
	}
	f, err := os.CreateTemp(r.CheckpointDir, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("rbtrain: write checkpoint: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("rbtrain: write checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("rbtrain: sync checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("rbtrain: close checkpoint: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(r.CheckpointDir, name)); err != nil {
		return fmt.Errorf("rbtrain: commit checkpoint: %w", err)
	}
	return nil
}

// ReadCheckpoint reads a checkpoint file; ok is false when there is none yet.
func (r *Run) ReadCheckpoint(name string) (data []byte, ok bool, err error) {
	data, err = os.ReadFile(filepath.Join(r.CheckpointDir, name))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("rbtrain: read checkpoint: %w", err)
	}
	return data, true, nil
}
