package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A state directory is self-contained: it holds a copy of the spec and of the files it refers
// to (its profile), so that status, report and resume work when the original moves or vanishes.
// These are the names of what it holds.
const (
	SpecCopy       = "spec.yaml"
	FilesCopy      = "spec-files"   // the files the spec refers to, by their position in Files
	CatalogCopy    = "catalog.json" // the local instance catalog the run was started with, if any
	Journal        = "journal.jsonl"
	PlanFile       = "plan.json"
	RunJSON        = "run.json"    // written last: it makes a directory a run
	ReportFile     = "report.json" // the run's report, once it finished
	DriverLog      = "driver.log"  // every message its drivers printed, stamped with the time and run ID
	CancelFile     = "cancel"      // asks the run's driver to mark the run cancelled as it stops
	LogsDir        = "logs"        // one file per trial: every launch, every worker
	WorkDir        = "work"        // the local runtime's worker directories
	CheckpointsDir = "checkpoints" // the checkpoint store, unless the spec names another
	TmpDir         = "tmp"         // temporary files of a remote checkpoint store
	NodesFile      = "nodes.json"  // the local provider's nodes
	NomadDir       = "nomad"       // the Nomad server and client agents started for the run
	CodeDir        = "code"        // the code bundle a server's run was sent with, unpacked
)

// Errors a caller tells the user apart from failures (the CLI exits 2 on them).
var (
	// ErrNotRun: the directory holds no run, or a RUN argument names none.
	ErrNotRun = errors.New("not a run")
	// ErrSpec: the run's copy of its spec does not load.
	ErrSpec = errors.New("the run's spec does not load")
	// ErrAmbiguous: a RUN argument is the start of several runs' IDs.
	ErrAmbiguous = errors.New("ambiguous run")
	// ErrNoTrial: a trial ID the run does not have, or no trial ID at all.
	ErrNoTrial = errors.New("no such trial")
	// ErrHasRun: a directory that is to hold a new run holds one already.
	ErrHasRun = errors.New("holds a run")
	// ErrSpecChange: a spec that cannot become a run's (other stages, a plan that does not fit).
	ErrSpecChange = errors.New("the spec cannot replace the run's")
)

// userError is an error that says what to do in its own words and matches a sentinel above.
type userError struct {
	kind error
	msg  string
}

func (e *userError) Error() string        { return e.msg }
func (e *userError) Is(target error) bool { return target == e.kind }

func userErr(kind error, format string, args ...any) error {
	return &userError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// RunFile is what a state directory remembers of how its run was started.
type RunFile struct {
	RunID      string  `json:"run_id"`
	Backend    string  `json:"backend"`
	Spec       string  `json:"spec"` // where the spec was read from (for the changed-original warning)
	SpecSHA256 string  `json:"spec_sha256"`
	TimeScale  float64 `json:"time_scale"`
	Samples    int     `json:"samples"`
	Seed       int64   `json:"seed"`
	// NoReplan keeps the plan the run began with (run --no-replan).
	NoReplan bool `json:"no_replan,omitempty"`
	// Served says a multi-team server submitted the run: its driver's environment is the
	// server's, whose credentials no trainer or container is ever given.
	Served bool `json:"served,omitempty"`
	// Sandbox, set by a server on the local backend, is the identity the run's trainers run as
	// (process.Sandbox): every driver of the run, its resumes included, uses it.
	Sandbox *process.Sandbox `json:"sandbox,omitempty"`
	// Files maps each file the spec refers to, by the name it uses, to its copy's name under
	// spec-files/.
	Files map[string]string `json:"files,omitempty"`
	// CheckpointLayout is where the run keeps its keys in its checkpoint store
	// (checkpoint.LayoutPerRun for every run Create makes): a run.json without it is an older
	// binary's, whose keys are at the store's root (checkpoint.LayoutShared), and is resumed so.
	CheckpointLayout string `json:"checkpoint_layout,omitempty"`
	// Workdir is the folder the run's trainers run in: its spec's trainer.workdir, resolved
	// where the spec was read (absolute); or, relative to the state directory, the code bundle a
	// server's run was sent with (CodeDir), so that the run's folder can move (a mirror's
	// takeover on another server). It replaces trainer.workdir of the spec's copy, which no
	// longer sits beside the trainer. Empty (older runs): the driver's own folder.
	Workdir string `json:"workdir,omitempty"`
	// Code is the ID (codebundle.ID) of the code bundle the run was sent with, if any.
	Code string `json:"code,omitempty"`
}

// State is a run's state directory, loaded.
type State struct {
	Dir   string // absolute
	Run   RunFile
	Exp   *spec.Experiment
	Plan  *planner.Report
	Alloc sim.Alloc
	ASHA  *sim.ASHAPlan // an ASHA job's plan, instead of Alloc
}

// RunPlan is what every driver and reader of the run folds its journal against: the spec, the
// plan, the time scale.
func (st *State) RunPlan() runstate.Plan {
	return runstate.Plan{Experiment: st.Exp, Alloc: st.Alloc, ASHA: st.ASHA, TimeScale: st.Run.TimeScale}
}

// PlannedSchedule is one sampled run of the run's plan laid out on nodes (its stages', or its
// ASHA schedule's), for the planned Gantt chart beside the realized one.
func (st *State) PlannedSchedule() (sim.Schedule, error) {
	if st.ASHA != nil {
		m, err := sim.NewModel(st.Exp)
		if err != nil {
			return sim.Schedule{}, err
		}
		return m.ScheduleASHA(*st.Exp.Algorithm.ASHA, *st.ASHA, uint64(st.Exp.Seed))
	}
	s, err := sim.For(st.Exp)
	if err != nil {
		return sim.Schedule{}, err
	}
	return s.Schedule(st.Alloc)
}

// Open loads the state directory dir: its run.json, its copy of the spec and its plan.
func Open(dir string) (*State, error) {
	abs, err := filepath.Abs(dir) // agents and workers need absolute paths
	if err != nil {
		return nil, err
	}
	st := &State{Dir: abs}
	b, err := os.ReadFile(filepath.Join(abs, RunJSON))
	if err != nil {
		return nil, userErr(ErrNotRun, "%s is not a run's state directory: %v", abs, err)
	}
	if err := json.Unmarshal(b, &st.Run); err != nil {
		return nil, fmt.Errorf("read run.json: %w", err)
	}
	if st.Exp, _, err = LoadSpecCopy(abs, st.Run); err != nil {
		return nil, userErr(ErrSpec, "load the run's spec: %v", err)
	}
	st.Exp.Seed, st.Exp.Planner.Samples = st.Run.Seed, st.Run.Samples
	st.Exp.Trainer.Workdir = st.Run.Workdir
	if w := st.Run.Workdir; w != "" && !filepath.IsAbs(w) {
		st.Exp.Trainer.Workdir = filepath.Join(abs, w)
	}
	if st.Plan, err = ReadPlanFile(filepath.Join(abs, PlanFile)); err != nil {
		return nil, err
	}
	switch {
	case st.Exp.Algorithm.IsASHA() != (st.Plan.ASHA != nil):
		return nil, fmt.Errorf("the run's plan is not one of its spec's algorithm (asha or stages)")
	case st.Plan.ASHA != nil:
		st.ASHA = &st.Plan.ASHA.Elastic.Plan
	default:
		if st.Alloc, err = st.Plan.Alloc(st.Exp.Algorithm.Brackets()); err != nil {
			return nil, fmt.Errorf("the run's plan: %w", err)
		}
	}
	return st, nil
}

// LoadSpecCopy loads the run's spec from the state directory's copy, and returns its text too.
func LoadSpecCopy(dir string, rf RunFile) (*spec.Experiment, []byte, error) {
	path := filepath.Join(dir, SpecCopy)
	data, err := os.ReadFile(path)
	opts, cerr := SpecOptions(dir)
	if cerr != nil {
		return nil, nil, cerr
	}
	if os.IsNotExist(err) { // a state directory of before the copy: the original it names
		exp, src, err := spec.LoadSource(rf.Spec, opts...)
		if err != nil {
			return nil, nil, err
		}
		return exp, src.Data, nil
	}
	if err != nil {
		return nil, nil, err
	}
	exp, err := spec.Parse(path, data, func(ref string) ([]byte, error) {
		name, ok := rf.Files[ref]
		if !ok {
			return nil, fmt.Errorf("%s was not copied into the state directory", ref)
		}
		return os.ReadFile(filepath.Join(dir, FilesCopy, name))
	}, opts...)
	return exp, data, err
}

// SpecOptions are how the run in dir parses its spec: with the local instance catalog it was
// started with (CatalogCopy), whatever the catalog file says now; none when it had none.
func SpecOptions(dir string) ([]spec.Option, error) {
	path := filepath.Join(dir, CatalogCopy)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil, nil
	}
	f, err := spec.ReadCatalogFile(path)
	if err != nil {
		return nil, fmt.Errorf("the run's instance catalog: %w", err)
	}
	return []spec.Option{spec.WithCatalog(f.Catalog())}, nil
}

// WriteCatalog keeps the local instance catalog a run starts with in its state directory
// (before Create, which writes run.json last): a resume parses the spec with the catalog it was
// planned with, not the file as it is then.
func WriteCatalog(dir string, f *spec.CatalogFile) error {
	return spec.WriteCatalogFile(filepath.Join(dir, CatalogCopy), f)
}

// Resolve finds the state directory a RUN argument means: a directory holding a run, a run's
// name under root, or a run's ID (or an unambiguous prefix of one) under root. Its errors match
// ErrNotRun or ErrAmbiguous and say what to do.
func Resolve(root, arg string) (string, error) {
	isRun := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, RunJSON))
		return err == nil
	}
	if isRun(arg) {
		return arg, nil
	}
	if !strings.ContainsRune(arg, filepath.Separator) && isRun(filepath.Join(root, arg)) {
		return filepath.Join(root, arg), nil
	}
	var matches []string
	for _, dir := range Dirs(root) {
		b, err := os.ReadFile(filepath.Join(dir, RunJSON))
		var rf RunFile
		if err != nil || json.Unmarshal(b, &rf) != nil {
			continue
		}
		if IDMatches(rf.RunID, arg) {
			matches = append(matches, dir)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", userErr(ErrNotRun, "no run %q: not a run's directory, nor a run's name or ID under %s (`rubberband list` shows them)", arg, root)
	default:
		return "", userErr(ErrAmbiguous, "%q is the start of several runs' IDs (%s): give more of it", arg, strings.Join(matches, ", "))
	}
}

// IDMatches says whether a RUN argument means the run of ID id: the ID, or a start of it of 4
// characters at least (the CLI here and a server's lookup alike).
func IDMatches(id, arg string) bool {
	return id == arg || len(arg) >= 4 && strings.HasPrefix(id, arg)
}

// Dirs are the directories under root that hold a run, in name order.
func Dirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, RunJSON)); e.IsDir() && err == nil {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// MirrorLayout is how a state directory is mirrored (rundir/mirror), for a server whose runs
// may move between machines: the journal at each sync, the logs by their new bytes, the rest
// whole; not what belongs to this machine (the local runtime's scratch, a local checkpoint
// store, local Nomad agents, the driver's lock).
func MirrorLayout() mirror.Layout {
	return mirror.Layout{
		Journal: Journal,
		Grown:   []string{LogsDir + "/", DriverLog},
		Skip:    []string{WorkDir + "/", CheckpointsDir + "/", TmpDir + "/", NomadDir + "/", "lock", ViewCache},
	}
}
