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
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/local"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/metrics"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "execute a plan (local processes or Nomad) and report realized vs predicted time and cost",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(),
			&cli.StringFlag{Name: "planner", DefaultText: "from the spec", Usage: "planner to use when no --plan is given (overrides planner.name)"},
			rootFlag(),
			&cli.StringFlag{Name: "state", DefaultText: "ROOT/NAME, or NAME-2, NAME-3… when taken", Usage: "the run's state directory (journal, checkpoints, logs)"},
			&cli.StringFlag{Name: "plan", Usage: "run this plan file instead of planning now"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			backendFlag("local (processes on this machine), nomad (NOMAD_ADDR's cluster, or a local server started for you; with cluster.nomad, the team's own clients: docs/nomad.md) or ec2 (EC2 instances as Nomad clients: docs/ec2.md)"),
			keepNodesFlag, logFormatFlag, metricsAddrFlag, noReplanFlag,
		),
		Before: checkLogFormat,
		Action: runAction,
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "finish a run whose driver died: finished trial-stages are kept, running ones restart from their checkpoints",
		ArgsUsage: "RUN",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			keepNodesFlag, logFormatFlag, metricsAddrFlag, noReplanFlag,
			&cli.BoolFlag{Name: "force", Usage: "resume a cancelled run"},
			&cli.BoolFlag{Name: "repair-journal", Usage: "cut a damaged journal at its first damaged record (the whole file is kept beside it) and rerun what came after"},
			&cli.StringFlag{Name: "spec", Usage: "change the run's spec to this file (journaled); the stages must stay the same"},
		},
		BashComplete: completeRun,
		Before:       checkLogFormat,
		Action:       resumeAction,
	}
}

// backendFlag chooses where runs go; RUBBERBAND_BACKEND sets its default for a shell or a team.
func backendFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "backend", Value: "local", EnvVars: []string{"RUBBERBAND_BACKEND"}, Usage: usage}
}

// freeRunDir is ROOT/NAME, or the first of NAME-2, NAME-3, … that holds no run yet, so that
// running a spec again starts a new run beside the last one.
func freeRunDir(root, name string) string {
	dir := filepath.Join(root, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
			return dir
		}
		dir = filepath.Join(root, fmt.Sprintf("%s-%d", name, i))
	}
}

// metricsAddrFlag serves the run's Prometheus metrics while it runs (opt-in).
var metricsAddrFlag = &cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://ADDR/metrics while the run goes (127.0.0.1:9464, say)"}

// serveMetrics serves m at addr/metrics and says where; the function it returns stops serving.
func serveMetrics(addr string, m *metrics.Metrics, log io.Writer) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErr("--metrics-addr: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(log, "metrics at http://%s/metrics\n", ln.Addr())
	return func() { srv.Close() }, nil
}

// logFormatFlag says how the driver's messages and progress reach standard error: text for a
// terminal, or JSON lines (log/slog's) for a log shipper. The driver log in the state directory
// stays text either way.
var logFormatFlag = &cli.StringFlag{Name: "log-format", Value: "text", Usage: "driver messages on standard error: text, or json (one object per line)"}

func checkLogFormat(c *cli.Context) error {
	if f := c.String("log-format"); f != "text" && f != "json" {
		return usageErr("--log-format %q: text or json", f)
	}
	return nil
}

// noReplanFlag keeps the plan a run began with; a run made with it keeps it when resumed.
var noReplanFlag = &cli.BoolFlag{Name: "no-replan", Usage: "keep the plan as it is: do not re-plan the stages not yet started from what the run observes (a budget is still watched)"}

var keepNodesFlag = &cli.BoolFlag{Name: "keep-nodes", Usage: "keep the nodes of a run that fails or is interrupted (they are released otherwise)"}

func runAction(c *cli.Context) error {
	exp, s, err := prepare(c)
	if err != nil {
		return err
	}
	dir := c.String("state")
	if dir == "" {
		dir = freeRunDir(c.String("root"), exp.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	runID := executor.NewRunID(time.Now(), rand.Uint32())
	lock, err := lockState(c, dir, runID)
	if err != nil {
		return err
	}
	defer lock.Close()
	for _, f := range []string{"journal.jsonl", "run.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return usageErr("%s already holds a run: `rubberband resume %s` finishes it, or choose another --state", dir, dir)
		}
	}
	if err := checkBackend(c.String("backend"), exp); err != nil { // before planning: it may take a while
		return err
	}
	if c.Float64("time-scale") <= 0 {
		return usageErr("--time-scale must be above 0")
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
		var res *planner.Result
		if rep, res, err = makePlan(c, exp, s); err != nil {
			return err
		}
		if !res.Feasible {
			return infeasible(exp, res)
		}
	}
	if err := overBudget(exp, rep); err != nil { // a given plan too: the budget is the spec's
		return err
	}
	specPath, err := filepath.Abs(c.Args().First())
	if err != nil {
		return err
	}
	sum, err := fileSHA(specPath)
	if err != nil {
		return err
	}
	rf := runFile{RunID: runID, Backend: c.String("backend"), Spec: specPath, SpecSHA256: sum, TimeScale: c.Float64("time-scale"), Samples: exp.Planner.Samples, Seed: exp.Seed,
		NoReplan: c.Bool("no-replan")}
	if err := copySpec(dir, specPath, exp, &rf); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "plan.json"), rep); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "run.json"), rf); err != nil { // last: it makes dir a run
		return err
	}
	return execute(c, dir)
}

func resumeAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("resume needs exactly one RUN argument")
	}
	st, err := openRun(c)
	if err != nil {
		return err
	}
	lock, err := lockState(c, st.dir, st.run.RunID)
	if err != nil {
		return err
	}
	defer lock.Close()
	journal := filepath.Join(st.dir, "journal.jsonl")
	if c.Bool("repair-journal") {
		kept, dropped, backup, err := executor.RepairJournal(journal, time.Now())
		if err != nil {
			return err
		}
		if backup != "" {
			fmt.Fprintf(c.App.ErrWriter, "rubberband: kept the journal's first %d record(s), cut %d line(s); the whole file is in %s\n", kept, dropped, backup)
		}
	}
	if p := c.String("spec"); p != "" {
		if err := changeSpec(c, st, p); err != nil {
			return err
		}
	} else if cur, err := os.ReadFile(st.run.Spec); err == nil {
		if copied, err := os.ReadFile(filepath.Join(st.dir, specCopy)); err == nil && !bytes.Equal(cur, copied) {
			fmt.Fprintf(c.App.ErrWriter, "rubberband: warning: %s changed since the run started; the run goes on with its own copy (%s). `resume --spec %s` would change it:\n%s",
				st.run.Spec, filepath.Join(st.dir, specCopy), st.run.Spec, lineDiff(copied, cur))
		}
	}
	return execute(c, st.dir)
}

// changeSpec makes the spec at path the run's spec, when its stages are the run's: journaled,
// then copied into the state directory.
func changeSpec(c *cli.Context, st *state, path string) error {
	exp, err := spec.Load(path)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := checkBackend(st.run.Backend, exp); err != nil {
		return err
	}
	exp.Seed, exp.Planner.Samples = st.run.Seed, st.run.Samples
	if a, b := fmt.Sprint(exp.Algorithm.Brackets()), fmt.Sprint(st.exp.Algorithm.Brackets()); a != b {
		return usageErr("%s has other stages than the run (%s, the run: %s): start a new run instead", path, a, b)
	}
	if _, err := st.plan.Alloc(exp.Algorithm.Brackets()); err != nil {
		return usageErr("the run's plan does not fit %s: %v", path, err)
	}
	old, _ := os.ReadFile(filepath.Join(st.dir, specCopy))
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	j, _, err := executor.OpenJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	err = j.Append(executor.Event{Ev: executor.EvSpec, Spec: hex.EncodeToString(sum[:]), Error: "resume --spec " + path})
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	st.run.Spec, st.run.SpecSHA256 = abs, hex.EncodeToString(sum[:])
	if err := copySpec(st.dir, abs, exp, &st.run); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(st.dir, "run.json"), st.run); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband: the run's spec is now %s:\n%s", path, lineDiff(old, data))
	return nil
}

// checkBackend says, before anything is planned or rented, why a backend cannot run a spec.
func checkBackend(backend string, exp *spec.Experiment) error {
	switch backend {
	case "local":
		return nil
	case "nomad":
		// Its providers rent one kind of node; a plan or a re-plan onto another would fail at
		// that stage's start, after the money for the stages before it was spent.
		if offers := exp.Offers(); len(offers) > 1 {
			return usageErr("--backend nomad rents one kind of node, the cluster's own (%s %s), and the spec offers %d (cluster.instance_types, cluster.markets): "+
				"run it on --backend local or ec2, or list one type and one market", offers[0].Type.InstanceType, offers[0].Market, len(offers))
		}
		return checkNomadPool(exp)
	case "ec2":
		return checkEC2(exp)
	}
	return usageErr("--backend %q is not a backend (local, nomad or ec2)", backend)
}

// lockState takes the state directory's lock for this driver's life, or says who holds it.
func lockState(c *cli.Context, dir, runID string) (*executor.DirLock, error) {
	lock, err := executor.LockDir(dir, runID)
	var held *executor.LockedError
	if errors.As(err, &held) {
		return nil, usageErr("%v", err)
	}
	if err != nil {
		return nil, err
	}
	if p := lock.Previous; p != nil {
		fmt.Fprintf(c.App.ErrWriter, "rubberband: took over the lock of PID %d on %s, which is gone\n", p.PID, p.Host)
	}
	return lock, nil
}

// execute runs (or resumes) the run in dir until it finishes, the user interrupts it, or it fails.
// The caller holds the state directory's lock.
func execute(c *cli.Context, dir string) error {
	st, err := openState(dir)
	if err != nil {
		return err
	}
	dir = st.dir // absolute from here on
	journal, past, err := executor.OpenJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	defer journal.Close()
	logw := &lineLog{w: c.App.ErrWriter, runID: st.run.RunID}
	if c.String("log-format") == "json" {
		logw.json = slog.New(slog.NewJSONHandler(c.App.ErrWriter, nil)).With("run", st.run.RunID)
	}
	if f, err := os.OpenFile(filepath.Join(dir, driverLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		defer f.Close()
		logw.file = f
	}
	provider, runtime, stopBackend, err := openBackend(c.Context, st, logw)
	if err != nil {
		return err
	}
	defer stopBackend()
	logw.note("driver PID %d took the run: %s backend, %d event(s) in the journal", os.Getpid(), st.run.Backend, len(past))
	if st.run.Backend != "local" { // its workers can outlive us: they watch this heartbeat
		store, err := openStore(c.Context, st.exp, dir)
		if err != nil {
			return err
		}
		beat, stopBeat := context.WithCancel(context.WithoutCancel(c.Context))
		defer stopBeat()
		go heartbeat.Beat(beat, store, st.run.RunID, heartbeat.Every, func(err error) { fmt.Fprintln(logw, err) })
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	predicted := st.plan.Predicted.JCT.Mean
	cfg := executor.Config{Experiment: st.exp, Alloc: st.alloc, Provider: provider, Runtime: runtime,
		Journal: journal, Past: past, RunID: st.run.RunID, TimeScale: st.run.TimeScale, Log: logw, Replan: !st.run.NoReplan && !c.Bool("no-replan"),
		KeepNodes: c.Bool("keep-nodes"), Force: c.Bool("force"),
		Progress: func(s executor.Status) { logw.progress(s, predicted) }}
	var m *metrics.Metrics
	if addr := c.String("metrics-addr"); addr != "" {
		m = metrics.New(st.run.RunID, st.exp.Name, predicted, st.plan.Predicted.Cost.Mean)
		stopMetrics, err := serveMetrics(addr, m, logw)
		if err != nil {
			return err
		}
		defer stopMetrics()
		cfg.Observe = m.Observe
		cfg.Progress = func(s executor.Status) { logw.progress(s, predicted); m.Progress(s) }
	}
	res, err := executor.Run(ctx, cfg)
	logw.done()
	if err != nil {
		logw.note("driver stopped: %v", err)
	} else {
		logw.note("finished: JCT %s, cost %s", clock(res.Realized.JCT), money(res.Realized.Cost))
		if m != nil {
			m.Finished(res.Realized.JCT, res.Realized.Cost)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && cancelRequested(dir) { // `rubberband cancel` stopped us: mark the run so
			cfg.Past, err = executor.ReadJournal(filepath.Join(dir, "journal.jsonl"))
			cerr := err
			if cerr == nil {
				cerr = executor.Cancel(context.WithoutCancel(c.Context), cfg, "cancelled by `rubberband cancel`")
			}
			if cerr == nil {
				os.Remove(filepath.Join(dir, cancelFile))
			}
			return &exitErr{code: exitError, err: errors.Join(fmt.Errorf("cancelled; its nodes are released"), cerr)}
		}
		kept := "its nodes are released"
		if cfg.KeepNodes {
			kept = "its nodes are kept (--keep-nodes)"
		}
		var overBudget *executor.BudgetError
		switch {
		case errors.As(err, &overBudget):
			return &exitErr{code: exitInfeasible, err: fmt.Errorf("%w (%s; `rubberband resume %s` carries on)", err, kept, dir)}
		case errors.Is(err, executor.ErrCancelled):
			return &exitErr{code: exitError, err: err}
		case errors.Is(err, context.Canceled):
			return &exitErr{code: exitError, err: fmt.Errorf("interrupted; %s; `rubberband resume %s` carries on", kept, dir)}
		}
		return fmt.Errorf("run: %w (%s; state kept in %s)", err, kept, dir)
	}
	if err := writeJSONFile(filepath.Join(dir, "report.json"), executor.Compare(st.plan, res)); err != nil {
		return err
	}
	return printRun(c, st, res)
}

// printRun writes a run's report: as JSON, or as its best trial, its stages predicted beside
// realized, and the totals.
func printRun(c *cli.Context, st *state, res *executor.Result) error {
	rep := executor.Compare(st.plan, res)
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, rep)
	}
	status := "finished"
	switch {
	case res.Cancelled != "":
		status = "cancelled"
	case !res.Finished:
		status = "not finished"
	}
	printRunTable(c.App.Writer, st, res, status)
	return nil
}

func printRunTable(w io.Writer, st *state, res *executor.Result, status string) {
	rep := executor.Compare(st.plan, res)
	fmt.Fprintf(w, "%s · run %s · %s · state in %s\n\n", res.Experiment, res.RunID, status, st.dir)
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
	if len(rep.Interruptions) > 0 {
		lost := 0
		for _, s := range rep.Stages {
			lost += s.Realized.Interrupted
		}
		fmt.Fprintf(w, "\n%s; %s relaunched from their checkpoints:\n", plural(len(rep.Interruptions), "spot interruption"), plural(lost, "gang"))
		for _, in := range rep.Interruptions {
			fmt.Fprintf(w, "  %s  %s %v: %s\n", clock(in.At), in.Bracket, in.Nodes, in.Why)
		}
	}
	printRevisions(w, st, rep)
	fmt.Fprintf(w, "\npredicted  JCT %s   cost %s\n", clock(rep.Predicted.JCT), money(rep.Predicted.Cost))
	// A run that re-planned is held to the plan it followed: its last revision's forecast.
	against, of := rep.Predicted, ""
	if r := rep.Replanned; r != nil {
		fmt.Fprintf(w, "re-planned JCT %s   cost %s   (forecast at the last re-plan, %s)\n", clock(r.JCT), money(r.Cost), clock(rep.Revisions[len(rep.Revisions)-1].At))
		against, of = *r, fmt.Sprintf(" against the re-plan; %+.1f%% time, %+.1f%% cost against the first plan",
			pct(rep.Realized.JCT, rep.Predicted.JCT), pct(rep.Realized.Cost, rep.Predicted.Cost))
	}
	fmt.Fprintf(w, "realized   JCT %s   cost %s   (%+.1f%% time, %+.1f%% cost%s)\n",
		clock(rep.Realized.JCT), money(rep.Realized.Cost), pct(rep.Realized.JCT, against.JCT), pct(rep.Realized.Cost, against.Cost), of)
	if p := st.plan; p.Static != nil && p.SavingPct != nil && res.Finished {
		nodes := 0
		for _, b := range p.Static.Brackets {
			nodes += b.Stages[0].Nodes
		}
		static := p.Static.Predicted.Cost.Mean
		fmt.Fprintf(w, "static     cost %s predicted for the best static cluster (%s): the elastic plan saved %.1f%% (%.1f%% predicted)\n",
			money(static), plural(nodes, "node"), -pct(rep.Realized.Cost, static), *p.SavingPct)
	}
}

// printRevisions lists the run's re-plans, and, while it runs, its latest forecast against the
// deadline and the budget.
func printRevisions(w io.Writer, st *state, rep executor.Report) {
	if len(rep.Revisions) > 0 {
		fmt.Fprintf(w, "\n%s:\n", plural(len(rep.Revisions), "re-plan"))
		for _, r := range rep.Revisions {
			fmt.Fprintf(w, "  %s  %s from stage %d: %s\n            GPUs %v -> %s; forecast JCT %s -> %s (P(miss) %.0f%% -> %.0f%%), cost %s -> %s\n",
				clock(r.At), r.Bracket, r.Stage, r.Reason, r.GPUsBefore, sim.FormatStages(r.Plan), clock(r.Before.JCT), clock(r.After.JCT),
				100*r.Before.MissProb, 100*r.After.MissProb, money(r.Before.Cost), money(r.After.Cost))
			if r.DeadlineGivesWay {
				fmt.Fprintf(w, "            the deadline gives way to the budget\n")
			}
		}
	}
	if f := rep.Forecast; f != nil && !rep.Finished {
		fmt.Fprintf(w, "\nforecast   JCT %s (deadline %s, P(miss) %.0f%%)   cost %s", clock(f.JCT), clock(st.exp.Deadline.D().Seconds()), 100*f.MissProb, money(f.Cost))
		if b := st.exp.Budget.MaxCostUSD; b > 0 {
			word := "within"
			if f.Cost > b {
				word = "OVER"
			}
			fmt.Fprintf(w, " (%s the budget %s)", word, money(b))
		}
		fmt.Fprintln(w)
	}
}

func pct(real, pred float64) float64 {
	if pred == 0 {
		return 0
	}
	return 100 * (real - pred) / pred
}

// slowNodes emulates an offer's persistent stragglers (profile.slow_nodes) on the local backend,
// seeded by the run: the plan expects them, so the run should meet them.
func slowNodes(o *sim.Offer, seed int64) *local.SlowEmulation {
	if o.SlowShare <= 0 || o.SlowFactor <= 1 {
		return nil
	}
	return &local.SlowEmulation{Share: o.SlowShare, Factor: o.SlowFactor, Seed: uint64(seed)}
}

// openBackend builds the run's provider and runtime.
func openBackend(ctx context.Context, st *state, logw io.Writer) (cloud.Provider, executor.Runtime, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	switch st.run.Backend {
	case "nomad":
		return nomadBackend(ctx, st.exp, st.dir, st.run.TimeScale, self, st.run.RunID)
	case "ec2":
		return ec2Backend(ctx, st.exp, st.dir, st.run.TimeScale, st.run.RunID, st.alloc)
	}
	m, err := sim.NewModel(st.exp)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := openStore(ctx, st.exp, st.dir)
	if err != nil {
		return nil, nil, nil, err
	}
	runtime := &process.Runtime{Store: store, WorkDir: filepath.Join(st.dir, "work"), LogDir: filepath.Join(st.dir, "logs"), Self: self, Trainer: trainerBinary(self),
		ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(st.run.TimeScale, 'g', -1, 64)}, Log: logw}
	var spot *local.SpotEmulation
	var more []local.Kind // every other instance type and market the spec offers
	for i, o := range m.Offers {
		// Spot nodes are interrupted as the plan expects: the notice stops their gangs. Every
		// spot offer follows the one spot block.
		if o.Spot != nil && spot == nil {
			spot = &local.SpotEmulation{Model: o.Spot, Notice: st.exp.Cluster.Spot.Notice.D(), Seed: uint64(st.exp.Seed),
				Notify: func(node, notice string) { fmt.Fprintln(logw, notice); runtime.InterruptNode(node, notice) }}
		}
		if i > 0 {
			more = append(more, local.Kind{Offer: offerOf(st.exp, o), GPUsPerNode: o.GPUsPerNode, Scale: o.Scale, Init: o.Init, Data: o.DataLatency,
				Slow: slowNodes(o, st.exp.Seed)})
		}
	}
	provider, err := local.New(local.Config{StateFile: filepath.Join(st.dir, "nodes.json"), GPUsPerNode: st.exp.Cluster.GPUsPerNode, More: more,
		Scale: m.Scale, Init: m.Init, Data: m.DataLatency, Offer: offerOf(st.exp, m.Offer), TimeScale: st.run.TimeScale, Spot: spot, Slow: slowNodes(m.Offer, st.exp.Seed),
		Rand: rand.New(rand.NewPCG(uint64(st.exp.Seed), uint64(time.Now().UnixNano())))})
	if err != nil {
		return nil, nil, nil, err
	}
	return provider, runtime, func() { provider.Close(); runtime.Close() }, nil
}

// trainerBinary is the small binary of the built-in trainers beside the CLI's, when it is there
// (make build puts it there): launches start faster than from the whole CLI.
func trainerBinary(self string) string {
	p := filepath.Join(filepath.Dir(self), "rubberband-trainer")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// offerOf is the kind of node one of the model's offers rents, at the price the model bills.
func offerOf(exp *spec.Experiment, o *sim.Offer) cloud.Offer {
	typ := o.Type
	if typ == "" {
		typ = exp.Cluster.InstanceType
	}
	return cloud.Offer{InstanceType: typ, Market: cloud.Market(o.Market), PricePerHour: o.NodePricePerSecond * 3600}
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
	return writeFileAtomic(path, buf.Bytes())
}

// lineLog writes the run's messages and its live progress line to the terminal (or a log).
// Brackets report from their own goroutines: mu keeps the line whole.
// Messages also go to the run's driver log, stamped (`rubberband logs RUN`).
type lineLog struct {
	mu      sync.Mutex
	w       io.Writer
	file    io.Writer // the driver log; nil: none
	runID   string
	json    *slog.Logger // --log-format json: every message and progress report as a JSON line on w
	last    time.Time
	pending bool
	stage   string // the bracket's stage last reported, to note each new one in the driver log
}

// note writes a line to the driver log only: what a later reader needs, not the terminal.
func (l *lineLog) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Write(stampLines([]byte(fmt.Sprintf(format, args...)), time.Now(), l.runID))
	}
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	if l.file != nil {
		l.file.Write(stampLines(p, time.Now(), l.runID)) // best effort: the terminal has it too
	}
	if l.json != nil {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			l.json.Info(line)
		}
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *lineLog) progress(s executor.Status, predictedJCT float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < 200*time.Millisecond && s.Done < s.Total {
		return
	}
	l.last = time.Now()
	eta := max(0, predictedJCT-s.Elapsed.Seconds())
	line := fmt.Sprintf("[%s] stage %d/%d: %d/%d trials done", s.Bracket, s.Stage+1, s.Stages, s.Done, s.Total)
	if stage := fmt.Sprintf("[%s] stage %d/%d", s.Bracket, s.Stage+1, s.Stages); stage != l.stage && l.file != nil {
		l.stage = stage
		l.file.Write(stampLines([]byte(line+fmt.Sprintf(" · elapsed %s · %s so far", clock(s.Elapsed.Seconds()), money(s.Cost))), time.Now(), l.runID))
	}
	if l.json != nil {
		l.json.Info("progress", "bracket", s.Bracket, "stage", s.Stage+1, "stages", s.Stages, "done", s.Done, "total", s.Total,
			"failed", s.Failed, "elapsed_s", s.Elapsed.Seconds(), "eta_s", eta, "cost", s.Cost)
		return
	}
	if s.Failed > 0 {
		line += fmt.Sprintf(" (%d failed)", s.Failed)
	}
	line += fmt.Sprintf(" · elapsed %s · ETA %s · %s so far", clock(s.Elapsed.Seconds()), clock(eta), money(s.Cost))
	if f, ok := l.w.(*os.File); ok && isTTY(f) {
		fmt.Fprintf(l.w, "\r\033[K%s", line)
		l.pending = true
		return
	}
	fmt.Fprintln(l.w, line)
}

func (l *lineLog) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
}

func (l *lineLog) clear() {
	if l.pending {
		fmt.Fprint(l.w, "\r\033[K")
		l.pending = false
	}
}
