package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/local"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

// runFile is what a state directory remembers of how its run was started.
type runFile struct {
	Backend    string  `json:"backend"`
	Spec       string  `json:"spec"`
	SpecSHA256 string  `json:"spec_sha256"`
	TimeScale  float64 `json:"time_scale"`
	Samples    int     `json:"samples"`
	Seed       int64   `json:"seed"`
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "execute a plan on the embedded local backend and report realized vs predicted time and cost",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(),
			&cli.StringFlag{Name: "planner", Usage: "planner to use when no --plan is given"},
			&cli.StringFlag{Name: "state", Usage: "state directory (journal, checkpoints, logs); default .rubberband/NAME"},
			&cli.StringFlag{Name: "plan", Usage: "run this plan file instead of planning now"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			&cli.StringFlag{Name: "backend", Value: "local", Usage: "local (processes on this machine) or nomad (NOMAD_ADDR's cluster, or a local server started for you)"},
		),
		Action: runAction,
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "finish a run whose driver died: finished trial-stages are kept, running ones restart from their checkpoints",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("resume needs exactly one DIR argument")
			}
			return execute(c, c.Args().First(), nil)
		},
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a run's progress from its state directory",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}},
		Action:    reportAction, // report without pictures
	}
}

func runAction(c *cli.Context) error {
	exp, s, err := prepare(c)
	if err != nil {
		return err
	}
	dir := c.String("state")
	if dir == "" {
		dir = filepath.Join(".rubberband", exp.Name)
	}
	if _, err := os.Stat(filepath.Join(dir, "journal.jsonl")); err == nil {
		return usageErr("%s already holds a run: `rubberband resume %s` finishes it, or choose another --state", dir, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	// The plan: given, or made now with the spec's planner.
	var rep *planner.Report
	if p := c.String("plan"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return usageErr("open plan: %v", err)
		}
		rep, err = planner.ReadReport(f)
		f.Close()
		if err != nil {
			return usageErr("%v", err)
		}
	} else {
		prob, err := planner.NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
		if err != nil {
			return usageErr("%v", err)
		}
		res, err := planner.Run(prob, exp.Planner.Name)
		if err != nil {
			return err
		}
		if !res.Feasible {
			return &exitErr{code: exitInfeasible, err: fmt.Errorf("no plan meets the deadline %s: the fastest takes %s", exp.Deadline.D(), clock(res.Best.JCT))}
		}
		predicted, err := s.Simulate(res.Best.Alloc)
		if err != nil {
			return err
		}
		rep = planner.NewReport(exp, exp.Planner.Name, exp.Deadline.Seconds(), true, predicted)
	}
	specPath, err := filepath.Abs(c.Args().First())
	if err != nil {
		return err
	}
	sum, err := fileSHA(specPath)
	if err != nil {
		return err
	}
	rf := runFile{Backend: c.String("backend"), Spec: specPath, SpecSHA256: sum, TimeScale: c.Float64("time-scale"), Samples: exp.Planner.Samples, Seed: exp.Seed}
	if rf.Backend != "local" && rf.Backend != "nomad" {
		return usageErr("--backend %q is not a backend (local or nomad)", rf.Backend)
	}
	if rf.TimeScale <= 0 {
		return usageErr("--time-scale must be above 0")
	}
	if err := writeJSONFile(filepath.Join(dir, "run.json"), rf); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "plan.json"), rep); err != nil {
		return err
	}
	return execute(c, dir, exp)
}

// state is a run's state directory, loaded.
type state struct {
	dir   string
	run   runFile
	exp   *spec.Experiment
	plan  *planner.Report
	alloc sim.Alloc
}

func openState(dir string) (*state, error) {
	abs, err := filepath.Abs(dir) // agents and workers need absolute paths
	if err != nil {
		return nil, err
	}
	dir = abs
	st := &state{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, usageErr("%s is not a run's state directory: %v", dir, err)
	}
	if err := json.Unmarshal(b, &st.run); err != nil {
		return nil, fmt.Errorf("read run.json: %w", err)
	}
	if st.exp, err = spec.Load(st.run.Spec); err != nil {
		return nil, usageErr("load the run's spec %s: %v", st.run.Spec, err)
	}
	st.exp.Seed, st.exp.Planner.Samples = st.run.Seed, st.run.Samples
	f, err := os.Open(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, fmt.Errorf("open plan: %w", err)
	}
	defer f.Close()
	if st.plan, err = planner.ReadReport(f); err != nil {
		return nil, err
	}
	if st.alloc, err = st.plan.Alloc(st.exp.Algorithm.Brackets()); err != nil {
		return nil, fmt.Errorf("the run's plan: %w", err)
	}
	return st, nil
}

// execute runs (or resumes) the run in dir until it finishes, the user interrupts it, or it fails.
func execute(c *cli.Context, dir string, _ *spec.Experiment) error {
	st, err := openState(dir)
	if err != nil {
		return err
	}
	dir = st.dir // absolute from here on
	if sum, err := fileSHA(st.run.Spec); err == nil && sum != st.run.SpecSHA256 {
		fmt.Fprintf(c.App.ErrWriter, "rubberband: warning: %s changed since the run started\n", st.run.Spec)
	}
	m, err := sim.NewModel(st.exp)
	if err != nil {
		return err
	}
	journal, past, err := executor.OpenJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	defer journal.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logw := &lineLog{w: c.App.ErrWriter}
	var provider cloud.Provider
	var runtime executor.Runtime
	switch st.run.Backend {
	case "nomad":
		var stopNomad func()
		if provider, runtime, stopNomad, err = nomadBackend(c.Context, st.exp, dir, st.run.TimeScale, self); err != nil {
			return err
		}
		defer stopNomad()
	default:
		if provider, err = local.New(local.Config{StateFile: filepath.Join(dir, "nodes.json"), GPUsPerNode: st.exp.Cluster.GPUsPerNode,
			Scale: m.Scale, Init: m.Init, TimeScale: st.run.TimeScale, Rand: rand.New(rand.NewPCG(uint64(st.exp.Seed), uint64(time.Now().UnixNano())))}); err != nil {
			return err
		}
		store, err := openStore(c.Context, st.exp, dir)
		if err != nil {
			return err
		}
		runtime = &process.Runtime{Store: store, WorkDir: filepath.Join(dir, "work"), LogDir: filepath.Join(dir, "logs"), Self: self,
			ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(st.run.TimeScale, 'g', -1, 64)}, Log: logw}
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	predicted := st.plan.Predicted.JCT.Mean
	res, err := executor.Run(ctx, executor.Config{Experiment: st.exp, Alloc: st.alloc, Provider: provider, Runtime: runtime,
		Journal: journal, Past: past, TimeScale: st.run.TimeScale, Log: logw,
		Progress: func(s executor.Status) { logw.progress(s, predicted) }})
	logw.done()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return &exitErr{code: exitError, err: fmt.Errorf("interrupted: `rubberband resume %s` carries on", dir)}
		}
		return fmt.Errorf("run: %w (state kept in %s)", err, dir)
	}
	if err := writeJSONFile(filepath.Join(dir, "report.json"), runReport(st, res)); err != nil {
		return err
	}
	return printRun(c, st, res)
}

// RunReport is the JSON report of a run: the best trial, and predicted vs realized.
type RunReport struct {
	Experiment string                 `json:"experiment"`
	Finished   bool                   `json:"finished"`
	Best       *executor.BestTrial    `json:"best"`
	Predicted  executor.Measured      `json:"predicted"`
	Realized   executor.Measured      `json:"realized"`
	Stages     []StageReport          `json:"stages"`
	Trials     []executor.TrialResult `json:"trials"`
}

// StageReport puts one stage's prediction beside what happened.
type StageReport struct {
	Bracket   string               `json:"bracket"`
	Stage     int                  `json:"stage"`
	Predicted sim.StageResult      `json:"predicted"`
	Realized  executor.StageResult `json:"realized"`
}

func runReport(st *state, res *executor.Result) RunReport {
	r := RunReport{Experiment: res.Experiment, Finished: res.Finished, Best: res.Best, Realized: res.Realized, Trials: res.Trials,
		Predicted: executor.Measured{JCT: st.plan.Predicted.JCT.Mean, Cost: st.plan.Predicted.Cost.Mean}}
	for b, br := range res.Brackets {
		for k, real := range br.Stages {
			r.Stages = append(r.Stages, StageReport{Bracket: br.Name, Stage: k, Predicted: st.plan.Brackets[b].Stages[k], Realized: real})
		}
	}
	return r
}

func printRun(c *cli.Context, st *state, res *executor.Result) error {
	rep := runReport(st, res)
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, rep)
	}
	w := c.App.Writer
	state := "finished"
	if !res.Finished {
		state = "not finished"
	}
	fmt.Fprintf(w, "%s · %s · state in %s\n\n", res.Experiment, state, st.dir)
	if res.Best != nil {
		params, _ := json.Marshal(res.Best.Params)
		fmt.Fprintf(w, "best trial %s: %s %.4f with %s\n\n", res.Best.Trial, st.exp.Objective.Metric, res.Best.Metric, params)
	}
	var buf bytes.Buffer
	tw := newTable(&buf, "BRACKET", "STAGE", "TRIALS", "ITERS", "GPUS", "NODES", "DONE", "FAILED", "PRED TIME", "TIME", "PRED COST", "COST")
	for _, s := range rep.Stages {
		tw.row(s.Bracket, s.Stage, s.Realized.Trials, s.Realized.Iters, s.Realized.GPUs, s.Realized.Nodes, s.Realized.Done, s.Realized.Failed,
			clock(s.Predicted.Duration), clock(s.Realized.Duration), money(s.Predicted.Cost), money(s.Realized.Cost))
	}
	tw.flush()
	w.Write(buf.Bytes())
	fmt.Fprintf(w, "\npredicted  JCT %s   cost %s\nrealized   JCT %s   cost %s   (%+.1f%% time, %+.1f%% cost)\n",
		clock(rep.Predicted.JCT), money(rep.Predicted.Cost), clock(rep.Realized.JCT), money(rep.Realized.Cost),
		pct(rep.Realized.JCT, rep.Predicted.JCT), pct(rep.Realized.Cost, rep.Predicted.Cost))
	return nil
}

func pct(real, pred float64) float64 {
	if pred == 0 {
		return 0
	}
	return 100 * (real - pred) / pred
}

func fileSHA(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func writeJSONFile(path string, v any) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// lineLog writes the run's messages and its live progress line to the terminal (or a log).
type lineLog struct {
	w       io.Writer
	last    time.Time
	pending bool
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.done()
	return l.w.Write(p)
}

func (l *lineLog) progress(s executor.Status, predictedJCT float64) {
	if time.Since(l.last) < 200*time.Millisecond && s.Done < s.Total {
		return
	}
	l.last = time.Now()
	eta := max(0, predictedJCT-s.Elapsed.Seconds())
	line := fmt.Sprintf("[%s] stage %d/%d: %d/%d trials done", s.Bracket, s.Stage+1, s.Stages, s.Done, s.Total)
	if s.Failed > 0 {
		line += fmt.Sprintf(" (%d failed)", s.Failed)
	}
	line += fmt.Sprintf(" · elapsed %s · ETA %s · %s so far", clock(s.Elapsed.Seconds()), clock(eta), money(s.Cost))
	if f, ok := l.w.(*os.File); ok && isTerminal(f) {
		fmt.Fprintf(l.w, "\r\033[K%s", line)
		l.pending = true
		return
	}
	fmt.Fprintln(l.w, line)
}

func (l *lineLog) done() {
	if l.pending {
		fmt.Fprint(l.w, "\r\033[K")
		l.pending = false
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
