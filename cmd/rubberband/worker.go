package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/nomad"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/urfave/cli/v2"
)

// Environment the worker wrapper reads to find the checkpoint store (never credentials).
const (
	envCheckpoints         = "RB_CHECKPOINTS"
	envCheckpointsEndpoint = "RB_CHECKPOINTS_ENDPOINT"
	envCheckpointsInsecure = "RB_CHECKPOINTS_INSECURE"
	envCheckpointsRegion   = "RB_CHECKPOINTS_REGION"
)

// storeEnv tells remote workers where the experiment's checkpoints are.
func storeEnv(exp *spec.Experiment, stateDir string) ([]string, error) {
	url := exp.Checkpoints.URL
	if url == "" {
		abs, err := filepath.Abs(filepath.Join(stateDir, "checkpoints"))
		if err != nil {
			return nil, err
		}
		url = "file://" + abs
	}
	return []string{envCheckpoints + "=" + url, envCheckpointsEndpoint + "=" + exp.Checkpoints.Endpoint,
		envCheckpointsInsecure + "=" + strconv.FormatBool(exp.Checkpoints.Insecure), envCheckpointsRegion + "=" + exp.Checkpoints.Region}, nil
}

// storeFromEnv opens the store that storeEnv describes, as a remote worker or node agent finds
// it in its environment; work holds its temporary files.
func storeFromEnv(ctx context.Context, work string) (checkpoint.Store, error) {
	insecure, _ := strconv.ParseBool(os.Getenv(envCheckpointsInsecure))
	return openStore(ctx, &spec.Experiment{Checkpoints: spec.Checkpoints{URL: os.Getenv(envCheckpoints), Endpoint: os.Getenv(envCheckpointsEndpoint),
		Insecure: insecure, Region: os.Getenv(envCheckpointsRegion)}}, work)
}

// gangFile is kept in a checkpoint the worker wrapper saves: the ID of the gang whose rank 0 saved
// it. The workers of a gang restore on their own nodes at their own pace, and one that starts
// after rank 0 has finished and saved must not take that version (it would find the trial at its
// target and train nothing) but the one the gang started from.
const gangFile = ".rubberband-gang"

// restoreGangCheckpoint restores the trial's newest checkpoint into dir, unless gang's own rank 0
// saved it: then the version before it.
func restoreGangCheckpoint(ctx context.Context, store checkpoint.Store, trialID, dir, gang string) (checkpoint.Restored, error) {
	restored, ok, err := checkpoint.RestoreDir(ctx, store, trialID, dir)
	if err != nil || !ok || gang == "" {
		return restored, err
	}
	if b, _ := os.ReadFile(filepath.Join(dir, gangFile)); string(b) != gang {
		return restored, nil
	}
	before, _, err := checkpoint.RestoreDirBefore(ctx, store, trialID, dir, restored.Info.Key)
	before.Skipped = append(restored.Skipped, before.Skipped...)
	return before, err
}

// workerCommand is what a remote runtime (Nomad) runs on a node: restore the trial's checkpoint
// from the store, run the trainer under the contract, save the checkpoint when rank 0 exits 0.
// exitWatchdog is the wrapper's exit code when it stopped its trainer by itself (deadline or
// heartbeat), as timeout(1) exits.
const exitWatchdog = 124

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:      "worker",
		Usage:     "run one worker of a trial on this node (launched by the nomad runtime)",
		ArgsUsage: "-- TRAINER [ARGS...]",
		Hidden:    true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trial", Required: true},
			&cli.IntFlag{Name: "rank", Required: true},
			&cli.StringFlag{Name: "gang", Usage: "the ID of this launch of the trial, shared by its workers (the Nomad job)"},
			&cli.DurationFlag{Name: "grace", Value: trial.GracePeriod, Usage: "how long the trainer has after SIGTERM before it is killed"},
			&cli.StringFlag{Name: "run", Usage: "the run's ID: watch its driver's heartbeat in the checkpoint store"},
			&cli.DurationFlag{Name: "heartbeat-timeout", Value: heartbeat.DefaultTimeout, Usage: "stop the trainer after this long without a heartbeat from the driver"},
			&cli.DurationFlag{Name: "timeout", Usage: "stop the trainer after this long (the launch's deadline; 0: none)"},
			&cli.BoolFlag{Name: "spot-notices", Usage: "watch this EC2 spot instance's IMDSv2 for an interruption notice, and stop the trainer (saving its checkpoint) when one comes"},
			&cli.DurationFlag{Name: "spot-poll", Value: time.Second, Usage: "how often IMDS is asked for a notice (AWS gives two minutes' notice)"},
		},
		Action: func(c *cli.Context) error {
			argv := c.Args().Slice()
			if len(argv) == 0 {
				return usageErr("worker needs the trainer command after --")
			}
			work := os.Getenv("NOMAD_TASK_DIR")
			if work == "" {
				var err error
				if work, err = os.MkdirTemp("", "rb-worker-"); err != nil {
					return err
				}
				defer os.RemoveAll(work)
			}
			store, err := storeFromEnv(c.Context, work)
			if err != nil {
				return err
			}
			trialID, rank := c.String("trial"), c.Int("rank")
			dir := filepath.Join(work, "checkpoint")
			restored, err := restoreGangCheckpoint(c.Context, store, trialID, dir, c.String("gang"))
			if err != nil {
				return fmt.Errorf("worker: restore: %w", err)
			}
			for _, s := range restored.Skipped {
				fmt.Fprintf(os.Stderr, "rubberband: skipped a damaged checkpoint: %v\n", s)
			}
			target, _ := strconv.Atoi(os.Getenv("RB_TARGET_ITER"))
			if rep, ok, err := trial.AtTarget(dir, target); err != nil {
				return fmt.Errorf("worker: %w", err)
			} else if ok { // a result the driver may have missed: report it again, train nothing
				fmt.Fprintf(os.Stderr, "rubberband: the checkpoint is at iteration %d already (target %d): re-reporting instead of training\n", rep.Iter, target)
				if rank == 0 {
					fmt.Fprintln(os.Stdout, trial.StampReport(trial.FormatReport(rep.Iter, rep.Metrics), rep.At))
				}
				return nil
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), "RB_CHECKPOINT_DIR="+dir)
			if ids := os.Getenv("NVIDIA_VISIBLE_DEVICES"); ids != "" && os.Getenv(nomad.GPUDevicesEnv) != "" {
				// Nomad assigned this task its GPUs: the trainer uses those (the last value wins).
				cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+ids)
			}
			cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
			// Its own process group, so that a stop reaches the trainer's children too; and it dies
			// with the wrapper, should Nomad kill the wrapper first.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			out, err := cmd.StdoutPipe()
			if err != nil {
				return err
			}
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("worker: start trainer: %w", err)
			}
			var last *trial.Report
			relayed := make(chan struct{})
			go func() { // reports reach the driver through logs: stamp them with when they were printed
				defer close(relayed)
				if err := trial.RelayReports(out, os.Stdout, time.Now, func(rep trial.Report) { last = &rep }); err != nil {
					fmt.Fprintf(os.Stderr, "rubberband: %v\n", err)
				}
			}()
			// SIGTERM (a stop) or the runtime's abort signal (another worker of the gang failed)
			// reach the trainer as SIGTERM; the wrapper itself kills it after the grace period, so
			// that it still has the time to save what a stopped trainer reached. The wrapper also
			// stops the trainer by itself past the launch's deadline or when the driver's heartbeat
			// is gone: a driver that died must not leave rented machines training.
			var stopped, aborted, interrupted atomic.Bool
			var kill sync.Once
			var whyMu sync.Mutex
			var why error // what made the wrapper stop the trainer by itself
			stop := func(abort bool, reason error) {
				if abort {
					aborted.Store(true)
				} else {
					stopped.Store(true)
				}
				if reason != nil {
					whyMu.Lock()
					why = cmp.Or(why, reason)
					whyMu.Unlock()
					fmt.Fprintf(os.Stderr, "rubberband: stopping the trainer: %v\n", reason)
				}
				syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				kill.Do(func() {
					time.AfterFunc(c.Duration("grace"), func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
				})
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, nomad.AbortSignal)
			go func() {
				for s := range sig {
					stop(s == nomad.AbortSignal, nil)
				}
			}()
			watch, endWatch := context.WithCancel(context.WithoutCancel(c.Context))
			defer endWatch()
			if d := c.Duration("timeout"); d > 0 {
				deadline := time.AfterFunc(d, func() { stop(false, fmt.Errorf("past the launch's deadline of %s", d)) })
				defer deadline.Stop()
			}
			if runID := c.String("run"); runID != "" {
				timeout := c.Duration("heartbeat-timeout")
				go func() {
					if err := heartbeat.Watch(watch, store, runID, timeout, min(timeout/4, heartbeat.Every)); err != nil && watch.Err() == nil {
						stop(false, err)
					}
				}()
			}
			if c.Bool("spot-notices") {
				say := func(s string) { fmt.Fprintf(os.Stderr, "rubberband: %s\n", s) }
				go func() {
					n, err := nodeagent.WatchSpot(watch, os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"), c.Duration("spot-poll"), say, say)
					if err == nil {
						interrupted.Store(true)
						stop(false, errors.New(n.String()))
					}
				}()
			}
			<-relayed
			err = cmd.Wait()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				return err
			}
			// Saved after a clean exit, and after a stop whatever the exit code: an interrupted gang
			// is relaunched from what it reached. Not when the gang failed.
			if rank == 0 && !aborted.Load() && (err == nil || stopped.Load()) {
				if last != nil {
					if err := trial.SaveLastReport(dir, *last); err != nil {
						return fmt.Errorf("worker: %w", err)
					}
				}
				if gang := c.String("gang"); gang != "" {
					if err := os.WriteFile(filepath.Join(dir, gangFile), []byte(gang), 0o644); err != nil {
						return fmt.Errorf("worker: %w", err)
					}
				}
				if _, err := checkpoint.SaveDir(context.WithoutCancel(c.Context), store, trialID, dir); err != nil {
					return fmt.Errorf("worker: save checkpoint: %w", err)
				}
			}
			whyMu.Lock()
			reason := why
			whyMu.Unlock()
			if reason != nil {
				code := exitWatchdog
				if interrupted.Load() {
					code = nomad.ExitInterrupted // the runtime stops the gang, saving, and the driver replaces the node
				}
				return &exitErr{code: code, err: fmt.Errorf("worker: %w (checkpoint saved)", reason)}
			}
			if exit != nil {
				return &exitErr{code: max(exit.ExitCode(), 1)}
			}
			return nil
		},
	}
}
