package starter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
)

// DefaultType is the instance type a starting spec names unless told otherwise: the catalog's
// cheapest GPU node (one T4), for a first run that costs cents.
const DefaultType = "g4dn.xlarge"

// DefaultFile is the spec init writes in the folder unless told another name.
const DefaultFile = "rubberband.yaml"

// Typical start-up latencies of an EC2 GPU instance, written with the catalog's figures until
// they are measured (`rubberband profile SPEC --backend ec2` measures both): request to
// running, and running (billed from then) to ready for trials: the image booted, the node's
// agent joined.
const (
	typicalScale = "{dist: normal, mean: 30s, std: 10s}"
	typicalInit  = "{dist: constant, value: 60s}"
)

// Options say what the starting spec holds.
type Options struct {
	// Name is the experiment's name; Render makes it a valid one ([a-z0-9-], at most
	// spec.MaxNameLen), "experiment" when nothing of it is left.
	Name string
	// Command is the trainer's command, its words as they are passed to exec.
	Command []string
	// Script is the file the command was found for ("" when given): named in comments. Given
	// without a Command (init SCRIPT), it is the script in the spec's folder to run with python3,
	// rather than the folder's one *.py.
	Script string
	// Found is what Scan read in the script: the search space and objective start from it.
	Found Found
	// Type is the instance type, a row of Catalog.
	Type    string
	Catalog spec.InstanceCatalog
	// File is the spec's file name, for the comments that say what to run next.
	File string
	// Now dates the spec.
	Now time.Time
}

// FindScript is the one Python script (*.py) directly in dir, by its name in dir. None, or
// more than one, is an error that names what was found: the caller then asks for a command.
func FindScript(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("find the training script: %w", err)
	}
	var scripts []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".py") && e.Type().IsRegular() {
			scripts = append(scripts, e.Name())
		}
	}
	switch len(scripts) {
	case 1:
		return scripts[0], nil
	case 0:
		return "", fmt.Errorf("no Python script (*.py) in %s: give the trainer's command with --command", dir)
	default:
		return "", fmt.Errorf("%d Python scripts in %s (%s): say which is the trainer with --command 'python3 FILE'",
			len(scripts), dir, strings.Join(scripts, ", "))
	}
}

// Found is what a script's text says of the hyperparameters it reads and the metric it reports.
type Found struct {
	Params []string // names read from the trial's parameters, in the order first read
	Metric string   // a metric it reports, "" when none is recognised
}

var (
	// paramRead is a read of a parameter from a dict of them: params["lr"], hp.get('width').
	paramRead = regexp.MustCompile(`\b(?:params|hparams|hp|config|cfg)\s*(?:\[\s*|\.get\(\s*)["']([A-Za-z_][A-Za-z0-9_-]*)["']`)
	// metricKey is a metric reported by name: "val_loss": x, or val_accuracy=x.
	metricKey = regexp.MustCompile(`["']?\b((?:val|valid|validation|test|eval)_?[A-Za-z0-9_]*|[A-Za-z0-9_]*(?:acc|accuracy|loss|error|f1|auc)[A-Za-z0-9_]*)\b["']?\s*[:=][^=]`)
)

// Scan reads what it can of a trainer script's hyperparameters and metric, for a starting
// spec's skeleton; what it misses the user adds.
func Scan(text string) Found {
	var f Found
	for _, m := range paramRead.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(f.Params, m[1]) && len(f.Params) < 20 {
			f.Params = append(f.Params, m[1])
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "@rb") && !strings.Contains(line, "report(") {
			continue
		}
		for _, m := range metricKey.FindAllStringSubmatch(line, -1) {
			if m[1] != "iter" && !strings.HasPrefix(m[1], "_") {
				f.Metric = m[1]
				return f
			}
		}
	}
	return f
}

// minimized reports whether a metric's name says that lower is better.
func minimized(metric string) bool {
	for _, w := range []string{"loss", "error", "err", "mse", "mae", "rmse", "perplexity"} {
		if strings.Contains(strings.ToLower(metric), w) {
			return true
		}
	}
	return false
}

// scaleLike reports whether a parameter's name is one searched on a log scale.
func scaleLike(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"lr", "learning_rate", "weight_decay", "wd", "l2", "l1", "eps", "epsilon", "decay", "alpha", "reg"} {
		if n == w || strings.HasSuffix(n, "_"+w) || strings.HasPrefix(n, w+"_") {
			return true
		}
	}
	return false
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// ExperimentName makes s (a folder's name, say) a valid experiment name.
func ExperimentName(s string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > spec.MaxNameLen {
		n = strings.TrimRight(n[:spec.MaxNameLen], "-")
	}
	if n == "" {
		return "experiment"
	}
	return n
}

// Render writes the starting spec. The type must be one of the catalog's; the command must not
// be empty.
func Render(o Options) ([]byte, error) {
	it, ok := o.Catalog.Lookup(o.Type)
	if !ok {
		return nil, fmt.Errorf("--type %s is not in the catalog (`rubberband catalog` lists its %d types)", o.Type, len(o.Catalog))
	}
	if len(o.Command) == 0 {
		return nil, errors.New("the trainer's command is empty")
	}
	file := o.File
	if file == "" {
		file = DefaultFile
	}
	what := "your trainer"
	if o.Script != "" {
		what = o.Script
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	// wc writes a field and its comment, the comments of a block aligned.
	wc := func(field, comment string) { fmt.Fprintf(&b, "%-38s # %s\n", field, comment) }
	w("# %s: a tuning job for %s, written by `rubberband init` on %s.", file, what, o.Now.UTC().Format("2006-01-02"))
	w("# Edit what is marked \"edit\"; `rubberband validate %s` checks it. Then:", file)
	wc("#   rubberband profile "+file, "measures the trainer's iteration and start-up times")
	wc("#   rubberband plan "+file, "the cheapest plan that meets the deadline, its time and cost")
	wc("#   rubberband run "+file, "runs it (here: nodes emulated on this machine); then")
	wc("#   rubberband best "+ExperimentName(o.Name), "prints the winning configuration")
	w("# The format: docs/spec.md. The trainer contract (RB_PARAMS in, @rb lines out): docs/trainers.md.")
	w("name: %s", ExperimentName(o.Name))
	wc("deadline: 1h", "edit: when the search must be done (30m, 2h, ...)")
	w("seed: 1")
	metric, mode, why := "val_accuracy", "max", "edit: a metric the trainer prints on its @rb lines; max or min"
	if m := o.Found.Metric; m != "" {
		metric, why = m, "edit: found in "+what+"; max or min"
		if minimized(m) {
			mode = "min"
		}
	}
	wc(fmt.Sprintf("objective: {metric: %s, mode: %s}", yamlScalar(metric), mode), why)
	w("")
	w("# Successive Halving: start `trials` configurations at min_iters iterations each, keep the best")
	w("# 1/eta at each stage, train the survivors on until max_iters. An iteration is what the")
	w("# trainer counts as one (an epoch, N steps).")
	w("algorithm:")
	w("  sha: {trials: 27, min_iters: 1, max_iters: 27, eta: 3}")
	w("  # hyperband: {min_iters: 1, max_iters: 27, eta: 3}         # brackets from many short trials to a few long ones")
	w("  # asha: {trials: 27, min_iters: 1, max_iters: 27, eta: 3}  # asynchronous: promotes as results come, no stage barrier")
	w("")
	w("# The hyperparameters: each trial gets one draw of each, as a JSON object in RB_PARAMS.")
	w("search_space:")
	if len(o.Found.Params) == 0 {
		wc("  lr: {type: loguniform, min: 1.0e-4, max: 1.0e-1}", "edit: log-uniform, for scales (min above 0)")
	}
	for _, p := range o.Found.Params {
		if scaleLike(p) {
			wc("  "+yamlScalar(p)+": {type: loguniform, min: 1.0e-5, max: 1.0e-1}", "edit: read by "+what+"; log-uniform, for scales (min above 0)")
		} else {
			wc("  "+yamlScalar(p)+": {type: uniform, min: 0.0, max: 1.0}", "edit: read by "+what+"; its range, or another kind below")
		}
	}
	w("  # momentum: {type: uniform, min: 0.8, max: 0.99}      # uniform between min and max")
	w("  # layers: {type: int, min: 1, max: 4}                 # an integer, both ends included")
	w("  # width: {type: choice, values: [64, 128, 256]}       # one of the values")
	w("  # beta1: {type: uniform, min: 0.8, max: 0.999, when: {optimizer: adam}}   # only when choice optimizer is adam")
	w("")
	w("trainer:")
	wc("  command: "+flowList(o.Command), "relative paths resolve in this spec's folder")
	w("")
	w("# One node is one %s. The lines marked \"catalog default\" are the catalog's figures for it", it.Name)
	w("# (`rubberband catalog`); edit them, or drop a line to take the catalog's.")
	w("cluster:")
	w("  instance_type: %s", it.Name)
	wc(fmt.Sprintf("  gpus_per_node: %d", it.GPUs), "catalog default: "+gpuWords(it))
	wc("  price_per_hour: "+price(it.PricePerHour), "catalog default: on-demand, "+priceWhere(it))
	wc("  scale_latency: "+typicalScale, "catalog default: a GPU instance's typical request to running (not measured)")
	wc("  init_latency: "+typicalInit, "catalog default: typical running (billed) to ready for trials")
	wc("  max_nodes: 8", "edit: the most nodes at once")
	w("")
	w("# No profile yet: `rubberband profile %s` measures the trainer and adds the line", file)
	w("# `profile: {file: ...}` below, naming the profile it writes. plan and run need it.")
	return b.Bytes(), nil
}

// flowList writes words as a YAML flow sequence, quoting those YAML would read otherwise.
func flowList(words []string) string {
	q := make([]string, len(words))
	for i, s := range words {
		q[i] = yamlScalar(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./][A-Za-z0-9_./=+-]*$`)

func yamlScalar(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~":
		return fmt.Sprintf("%q", s)
	}
	if plainWord.MatchString(s) {
		return s
	}
	return fmt.Sprintf("%q", s) // a JSON string is a YAML double-quoted one
}

func gpuWords(it spec.InstanceType) string {
	s := fmt.Sprintf("%d %s", it.GPUs, it.GPUModel)
	if it.GPUMemoryGiB > 0 {
		s += fmt.Sprintf(" (%g GiB)", it.GPUMemoryGiB)
	}
	return s
}

func price(p float64) string {
	s := fmt.Sprintf("%.6f", p)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func priceWhere(it spec.InstanceType) string {
	if slices.Contains(spec.Catalog(), it) {
		return "us-east-1, $/h"
	}
	return "$/h, from the local catalog"
}

// AddProfileFile names the profile file rel (relative to the spec's folder) in the spec at
// path, which gives no profile, by appending a line to it: its comments and layout stay as they
// are. check parses the new text before it replaces the old (atomically), so that a spec this
// would break (a flow mapping at the top, a profile section after all) is left alone and the
// error says what to add by hand.
func AddProfileFile(path, rel string, check func(data []byte) error) error {
	data, err := spec.ReadFile(path)
	if err != nil {
		return err
	}
	line := "profile: {file: " + yamlScalar(filepath.ToSlash(rel)) + "}   # measured by `rubberband profile`\n"
	next := slices.Clone(data)
	if len(next) > 0 && next[len(next)-1] != '\n' {
		next = append(next, '\n')
	}
	next = append(next, line...)
	if err := check(next); err != nil {
		return fmt.Errorf("name the profile in %s by hand (add %q): %w", path, strings.TrimSpace(line), err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("name the profile in %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(next); err != nil {
		tmp.Close()
		return fmt.Errorf("name the profile in %s: %w", path, err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Create writes data to path, refusing an existing file unless force.
func Create(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: rubberband init leaves it alone (--force overwrites it, --out writes another file)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// InputError is a starting spec the user must change something for: no script or several, a
// type the catalog lacks, a file already there.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Write writes the starting spec of o to out, in the folder dir: o.Command's, or python3 and
// dir's one script, whose parameters and metric seed the skeleton (a script that cannot be read
// leaves the generic one). What it writes must load as a spec (without a profile, which profile
// adds). It returns the options it wrote with; an error the user must act on is an *InputError.
func Write(o Options, dir, out string, force bool) (Options, error) {
	if len(o.Command) == 0 {
		script, err := o.Script, error(nil)
		if script == "" {
			script, err = FindScript(dir)
		} else if st, serr := os.Stat(filepath.Join(dir, script)); serr != nil || !st.Mode().IsRegular() {
			err = fmt.Errorf("no script %s in %s", script, dir)
		}
		if err != nil {
			return o, &InputError{err}
		}
		o.Script, o.Command = script, []string{"python3", script}
		if text, err := spec.ReadFile(filepath.Join(dir, script)); err == nil {
			o.Found = Scan(string(text))
		}
	}
	data, err := Render(o)
	if err != nil {
		return o, &InputError{err}
	}
	if _, err := spec.Parse(out, data, nil, spec.WithCatalog(o.Catalog), spec.ProfileOptional()); err != nil {
		return o, fmt.Errorf("init wrote a spec that does not validate (a bug): %w", err)
	}
	if err := Create(out, data, force); err != nil {
		return o, &InputError{err}
	}
	return o, nil
}
