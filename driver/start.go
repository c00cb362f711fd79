package driver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A Start is a `rubberband run`: the spec as the command line left it, and where and how to
// run it.
type Start struct {
	Spec    *spec.Experiment
	Source  *spec.Source
	Sim     *sim.Simulator    // plans the run when PlanFile is empty
	Catalog *spec.CatalogFile // the local catalog the spec was read with (nil: none)
	// Dir is the state directory; empty, a free one under Root is taken (rundir.Free).
	Dir, Root string
	Backend   string
	TimeScale float64 // wall seconds per spec second (a simulated backend runs at 1)
	// Faults, set, is the seed of the fault schedule a simulated backend runs through.
	Faults   *int64
	PlanFile string // run this plan instead of planning now
	// PlanTicker, when set, shows the planner's progress (not an ASHA schedule's search, which
	// says nothing as it goes): the function the planner calls, and the one that stops it.
	PlanTicker func() (progress func(evaluated int), stop func())
	Exec       Exec
}

// A Resume is a `rubberband resume` of the run in State.
type Resume struct {
	State         *rundir.State
	RepairJournal bool   // cut a damaged journal at its first damaged record
	SpecPath      string // make this file the run's spec (rundir.ChangeSpec)
	// LoadSpec reads the spec at SpecPath, saying its problems on w.
	LoadSpec func(path string, w io.Writer, opts ...spec.Option) (*spec.Experiment, *spec.Source, error)
	Exec     Exec
}

// Exec is how Start and Resume execute their run: Options (Log is where messages go; nil:
// nowhere), the trainers' log bound in MiB, and where a server's driver copies its journal
// (mirror.EnvAt, with Options.MirrorRun its key there; empty: nowhere).
type Exec struct {
	Options
	TrainerLogMB int
	MirrorAt     string
}

// StartRun makes the run s describes and executes it: its state directory is made and locked,
// the backend checked, the plan read or made, the run created (Create) and executed until it
// ends, SIGINT or SIGTERM stops it, or it fails (Execute). Errors a user must fix match ErrInput.
func StartRun(ctx context.Context, s Start) (*rundir.State, *runstate.Result, error) {
	exp := s.Spec
	if s.Exec.Log == nil {
		s.Exec.Log = io.Discard
	}
	dir := s.Dir
	if dir == "" {
		dir = rundir.Free(s.Root, exp.Name)
	}
	if err := rundir.Mkdir(dir); err != nil {
		return nil, nil, err
	}
	kind, err := Lookup(s.Backend)
	if err != nil {
		return nil, nil, err
	}
	runID, timeScale := journal.NewRunID(time.Now(), rand.Uint32()), s.TimeScale
	if s.Faults != nil && !kind.Simulated {
		return nil, nil, inputErr("--faults needs --backend %s", Names(func(k Kind) bool { return k.Simulated }))
	}
	if kind.Simulated { // its journal is a function of the spec, its seed and the faults
		var seed int64
		if s.Faults != nil {
			seed = *s.Faults
		}
		runID, timeScale = VirtualRunID(exp, seed), 1
	}
	lock, err := Lock(dir, runID, s.Exec.Log)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Close()
	if err := rundir.CheckFree(dir); err != nil {
		return nil, nil, err
	}
	if err := Check(s.Backend, exp); err != nil { // before planning: it may take a while
		return nil, nil, err
	}
	if !kind.Simulated { // the trainer runs in its folder, wherever run started
		if err := ResolveWorkdir(s.Exec.Log, exp, s.Source.Path); err != nil {
			return nil, nil, err
		}
	}
	if timeScale <= 0 {
		return nil, nil, inputErr("--time-scale must be above 0")
	}
	rep, err := planOf(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	// The spec's snapshot is the bytes planned from, not the file now: it may have changed.
	if err := Create(NewRun{Dir: dir, Source: s.Source, Spec: exp, Plan: rep, Catalog: s.Catalog,
		Run: rundir.RunFile{RunID: runID, Backend: s.Backend, TimeScale: timeScale, NoReplan: s.Exec.NoReplan, Workdir: exp.Trainer.Workdir}}); err != nil {
		return nil, nil, err
	}
	s.Exec.Faults = s.Faults
	return executeNow(ctx, dir, s.Exec)
}

// planOf is the run's plan: read from s.PlanFile, or made now with the spec's planner.
func planOf(ctx context.Context, s Start) (*planner.Report, error) {
	if s.PlanFile != "" {
		rep, err := rundir.ReadPlanFile(s.PlanFile)
		if err != nil {
			return nil, inputErr("%v", err)
		}
		return rep, nil
	}
	progress, stop := func(int) {}, func() {}
	if s.PlanTicker != nil && !s.Spec.Algorithm.IsASHA() {
		progress, stop = s.PlanTicker()
	}
	defer stop()
	return planner.PlanRun(ctx, s.Spec, s.Sim, progress)
}

// ResumeRun locks the run in r.State, repairs its journal or changes its spec when asked (or
// warns that its spec file changed since it started), and executes it as StartRun does.
func ResumeRun(ctx context.Context, r Resume) (*rundir.State, *runstate.Result, error) {
	if r.Exec.Log == nil {
		r.Exec.Log = io.Discard
	}
	st, log := r.State, r.Exec.Log
	lock, err := Lock(st.Dir, st.Run.RunID, log)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Close()
	if r.RepairJournal {
		kept, dropped, backup, err := journal.RepairJournal(filepath.Join(st.Dir, rundir.Journal), time.Now())
		if err != nil {
			return nil, nil, err
		}
		if backup != "" {
			fmt.Fprintf(log, "rubberband: kept the journal's first %s, cut %s; the whole file is in %s\n", format.Plural(kept, "record"), format.Plural(dropped, "line"), backup)
		}
	}
	if r.SpecPath != "" {
		if err := changeSpec(st, r.SpecPath, r.LoadSpec, log); err != nil {
			return nil, nil, err
		}
	} else if diff := st.OriginalDiff(); diff != "" {
		fmt.Fprintf(log, "rubberband: warning: %s changed since the run started; the run goes on with its own copy (%s). `resume --spec %s` would change it:\n%s",
			st.Run.Spec, filepath.Join(st.Dir, rundir.SpecCopy), st.Run.Spec, diff)
	}
	return executeNow(ctx, st.Dir, r.Exec)
}

// changeSpec makes the spec at path the run's spec (rundir.ChangeSpec), when its backend can
// run it.
func changeSpec(st *rundir.State, path string, load func(string, io.Writer, ...spec.Option) (*spec.Experiment, *spec.Source, error), log io.Writer) error {
	opts, err := rundir.SpecOptions(st.Dir) // the catalog the run was started with
	if err != nil {
		return err
	}
	exp, src, err := load(path, log, opts...)
	if err != nil {
		return err
	}
	if err := Check(st.Run.Backend, exp); err != nil {
		return err
	}
	old, err := rundir.ChangeSpec(st, src, exp)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "rubberband: the run's spec is now %s:\n%s", path, rundir.LineDiff(old, src.Data))
	return nil
}

// executeNow executes the run in dir (Execute) until it ends, SIGINT or SIGTERM (`rubberband
// cancel` too) stops it, or it fails; the caller holds its lock.
func executeNow(ctx context.Context, dir string, e Exec) (*rundir.State, *runstate.Result, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if e.TrainerLogMB <= 0 {
		return nil, nil, inputErr("--trainer-log-mb must be at least 1 (MiB), not %d", e.TrainerLogMB)
	}
	e.LogMax = int64(e.TrainerLogMB) << 20
	if e.MirrorAt != "" {
		m, closeMirror, err := mirror.Open(ctx, e.MirrorAt, sqlstore.OpenRunFiles)
		if err != nil {
			return nil, nil, err
		}
		defer closeMirror()
		e.Mirror = m
	}
	return Execute(ctx, dir, e.Options)
}

// ResolveWorkdir makes exp's trainer.workdir the absolute folder its trainer runs in
// (spec.WorkdirFor the spec at path), or says on w why there is none, as a spec problem
// (ErrInput).
func ResolveWorkdir(w io.Writer, exp *spec.Experiment, path string) error {
	if err := exp.CheckWorkdir(path); err != nil {
		fmt.Fprintln(w, err)
		return inputErr("%s: 1 problem", path)
	}
	exp.Trainer.Workdir = exp.WorkdirFor(path)
	return nil
}
