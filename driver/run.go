package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud/local"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/metrics"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/logcap"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
)

// The local provider passes its emulated spot notices on: the executor trains through them.
var _ executor.Noticer = (*local.Provider)(nil)

// Lock takes the state directory's lock for this driver's life. A lock a live driver holds is
// an error matching ErrInput that names it; a dead driver's lock is taken over, and log says so.
func Lock(dir, runID string, log io.Writer) (*rundir.DirLock, error) {
	if log == nil {
		log = io.Discard
	}
	lock, err := rundir.LockDir(dir, runID, nil)
	var held *rundir.LockedError
	if errors.As(err, &held) {
		return nil, inputErr("%v", err)
	}
	if err != nil {
		return nil, err
	}
	if p := lock.Previous; p != nil {
		fmt.Fprintf(log, "rubberband: took over the lock of PID %d on %s, which is gone\n", p.PID, p.Host)
	}
	return lock, nil
}

// ExitPaused is the exit code of a driver whose run an infrastructure fault paused
// (executor.PausedError): the CLI's, and what a server's Supervisor reads when the journal
// could not hold the pause.
const ExitPaused = 4

// Options are how Execute runs a run.
type Options struct {
	Log         io.Writer // messages and progress (standard error)
	JSONLog     bool      // messages and progress as JSON lines on Log
	KeepNodes   bool      // keep the nodes of a run that fails or is interrupted
	Force       bool      // resume a cancelled run
	NoReplan    bool      // keep the plan (a run started with it keeps it anyway)
	MetricsAddr string    // serve Prometheus metrics at http://ADDR/metrics while it runs
	// Faults, for a virtual run, is the seed of the fault schedule to run it through (DrawFaults).
	Faults *int64
	// Mirror, when set, is where the journal is copied at each of its syncs, before the sync
	// returns (a server's runs that may move: rundir/mirror); MirrorRun is the run's key there.
	Mirror    mirror.Store
	MirrorRun string
	// LogMax bounds each trial's log and the driver log, in bytes (logcap: one rotation, with a
	// line saying so); 0 is logcap.DefaultMax.
	LogMax int64
}

// Execute runs, or resumes, the run in dir until it finishes, ctx ends (the user interrupts),
// or it fails; the caller holds the lock. A finished run's report is written to report.json.
// A run that `rubberband cancel` stopped (ctx ended with a cancel requested) is marked
// cancelled and its nodes released. Its errors say what became of the nodes and how to go on;
// they wrap executor.BudgetError and executor.ErrCancelled.
func Execute(ctx context.Context, dir string, o Options) (*rundir.State, *runstate.Result, error) {
	st, err := rundir.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	k, err := Lookup(st.Run.Backend)
	if err != nil {
		return nil, nil, err
	}
	dir = st.Dir                                                             // absolute from here on
	if err := rundir.Mkdir(filepath.Join(dir, rundir.LogsDir)); err != nil { // before a runtime makes it, less private
		return nil, nil, err
	}
	var file io.Writer // the driver log, bounded as a trial's is: it notes what trainers print amiss
	if f, err := logcap.Open(filepath.Join(dir, rundir.DriverLog), o.LogMax, rundir.FileMode); err == nil {
		defer f.Close()
		file = f
	}
	log := NewLog(o.Log, o.JSONLog, file, st.Run.RunID)
	if k.LocalTrainers {
		// Its workers are this process's children: what they leave behind (a setsid'd child)
		// is adopted here rather than by init, where the runtime finds and ends it.
		if err := process.BecomeSubreaper(); err != nil {
			log.Note("%v: a worker's orphans are not followed", err)
		}
	}
	predicted := st.Plan.Predicted.JCT.Mean
	cfg := executor.ConfigFor(st.RunPlan())
	cfg.RunID, cfg.Log, cfg.Replan, cfg.KeepNodes, cfg.Force = st.Run.RunID, log, !st.Run.NoReplan && !o.NoReplan, o.KeepNodes, o.Force
	cfg.Progress = func(s runstate.Status) { log.Progress(s, predicted) }
	if len(st.Exp.Sampler.WarmStart) > 0 {
		ws, err := rundir.LoadWarmStart(dir, filepath.Dir(dir), st.Exp)
		if err != nil {
			return nil, nil, inputErr("%v", err)
		}
		for _, note := range ws.Notes {
			log.Note("%s", note)
		}
		cfg.WarmStart = ws.Observations
	}
	var m *metrics.Metrics
	if o.MetricsAddr != "" {
		m = metrics.New(st.Run.RunID, st.Exp.Name, predicted, st.Plan.Predicted.Cost.Mean)
		stop, err := serveMetrics(o.MetricsAddr, m, log)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		cfg.Live = m.Follow
		cfg.Progress = func(s runstate.Status) { log.Progress(s, predicted); m.Progress(s) }
	}
	var res *runstate.Result
	if k.Simulated {
		log.Note("driver PID %d took the run: %s backend", os.Getpid(), st.Run.Backend)
		res, err = executeVirtual(ctx, st, o, log, cfg)
	} else {
		res, err = execute(ctx, st, log, cfg, o)
	}
	log.Done()
	if err != nil {
		log.Note("driver stopped: %v", err)
		return st, nil, stopped(ctx, st, log, cfg.KeepNodes, err)
	}
	rep := runstate.Compare(st.Plan, res)
	if rep.DeadlineMissed {
		log.Note("finished: JCT %s, cost %s: DEADLINE MISSED by %s (deadline %s)", format.Clock(res.Realized.JCT), format.Money(res.Realized.Cost),
			format.Clock(rep.MissedByS), format.Clock(rep.DeadlineS))
	} else {
		log.Note("finished: JCT %s, cost %s", format.Clock(res.Realized.JCT), format.Money(res.Realized.Cost))
	}
	if m != nil {
		m.Finished(res.Realized.JCT, res.Realized.Cost)
	}
	if err := rundir.WriteJSON(filepath.Join(dir, rundir.ReportFile), rep); err != nil {
		return st, nil, err
	}
	return st, res, nil
}

// execute runs the run in st on its backend, from its journal.
func execute(ctx context.Context, st *rundir.State, log *Log, cfg executor.Config, o Options) (*runstate.Result, error) {
	path := filepath.Join(st.Dir, rundir.Journal)
	jo := journal.JournalOptions{Log: log, Reserve: journal.DefaultReserve}
	if o.Mirror != nil {
		wrap, err := mirror.JournalWrap(ctx, o.Mirror, o.MirrorRun, rundir.Journal, path)
		if err != nil {
			return nil, err
		}
		jo.Wrap = func(f journal.JournalFile) journal.JournalFile { return wrap(f) }
	}
	// From the snapshot beside the journal, when it still matches it: a large run's resume then
	// folds only the records after its last sync.
	journal, resumed, past, err := runstate.Resume(path, runstate.Plan{Experiment: cfg.Experiment, Alloc: cfg.Alloc, ASHA: cfg.ASHA, TimeScale: cfg.TimeScale}, jo, log)
	if err != nil {
		return nil, err
	}
	defer journal.Close()
	backend, err := openRun(ctx, st, log, o.LogMax)
	if err != nil {
		return nil, err
	}
	defer backend.Close()
	if resumed != nil {
		log.Note("driver PID %d took the run: %s backend, from its snapshot and %s after it in the journal", os.Getpid(), st.Run.Backend, format.Plural(len(past), "event"))
	} else {
		log.Note("driver PID %d took the run: %s backend, %s in the journal", os.Getpid(), st.Run.Backend, format.Plural(len(past), "event"))
	}
	cfg.Provider, cfg.Runtime, cfg.Journal, cfg.Past, cfg.State = backend.Provider, backend.Runtime, journal, past, resumed
	cfg.Snapshot = runstate.SnapshotPath(path)
	return executor.Run(ctx, cfg)
}

// stopped is the error of a run the executor stopped with err, saying what became of its nodes
// and how to go on; a run `rubberband cancel` stopped is marked cancelled first.
func stopped(ctx context.Context, st *rundir.State, log io.Writer, keepNodes bool, err error) error {
	dir := st.Dir
	if errors.Is(err, context.Canceled) && rundir.CancelRequested(dir) {
		return errors.Join(errors.New("cancelled; its nodes are released"), cancelHere(ctx, st, log))
	}
	kept := "its nodes are released"
	if keepNodes {
		kept = "its nodes are kept (--keep-nodes)"
	}
	var overBudget *executor.BudgetError
	var paused *executor.PausedError
	var broken *runstate.BrokenTrainerError
	if errors.As(err, &broken) {
		showTrialLogTail(ctx, dir, broken.Trials[0], log)
	}
	switch {
	case errors.As(err, &paused):
		return fmt.Errorf("%w; `rubberband resume %s` carries on once it is mended", err, dir)
	case errors.As(err, &overBudget):
		return fmt.Errorf("%w (%s; `rubberband resume %s` carries on)", err, kept, dir)
	case errors.Is(err, executor.ErrCancelled):
		return err
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted; %s; `rubberband resume %s` carries on", kept, dir)
	}
	return fmt.Errorf("run: %w (%s; state kept in %s)", err, kept, dir)
}

// brokenLogLines is how much of a broken trainer's first failed trial's log a stopped run shows:
// its last words are usually the reason (a traceback, a missing file), and a user who reads
// them needs no second command.
const brokenLogLines = 12

// showTrialLogTail writes the last lines of a trial's log to log, each cut to a terminal's width
// or two and without terminal escapes (a trainer's output must not drive the user's terminal);
// a log not written is passed over in silence (the error names `rubberband logs`).
func showTrialLogTail(ctx context.Context, dir, trial string, log io.Writer) {
	path, err := rundir.TrialLogOf(dir, trial)
	if err != nil {
		return
	}
	var tail strings.Builder
	if rundir.PrintLog(ctx, dir, path, brokenLogLines, false, term.NewSanitizer(&tail)) != nil || strings.TrimSpace(tail.String()) == "" {
		return
	}
	fmt.Fprintf(log, "the last lines of trial %s's log:\n", trial)
	for _, line := range strings.Split(strings.TrimRight(tail.String(), "\n"), "\n") {
		fmt.Fprintf(log, "  | %s\n", format.Shorten(line, 240))
	}
}

// serveMetrics serves m at addr/metrics and says where; the function it returns stops serving.
func serveMetrics(addr string, m *metrics.Metrics, log io.Writer) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, inputErr("--metrics-addr: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(log, "metrics at http://%s/metrics\n", ln.Addr())
	return func() { srv.Close() }, nil
}
