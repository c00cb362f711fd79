package trial

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Env is what one worker of a trial's gang is told, as environment variables.
type Env struct {
	TrialID    string
	Experiment string
	// Params is the trial's configuration as a JSON object.
	Params        map[string]any
	StartIter     int
	TargetIter    int
	CheckpointDir string
	Rank          int
	WorldSize     int
	LocalRank     int
	MasterAddr    string
	MasterPort    int
	// GPUs are the device indices on the worker's node.
	GPUs []int
}

// NodeSlowdownVar tells the built-in trainers how many times slower the gang's nodes make it:
// an emulated persistent straggler (the local provider's slow nodes). Real trainers ignore it.
const NodeSlowdownVar = "RB_SYNTH_NODE_SLOWDOWN"

// Vars returns the worker's environment as KEY=VALUE pairs: rubberband's RB_* variables and
// PyTorch's own names, so that a torch.distributed script runs unchanged.
func (e Env) Vars() ([]string, error) {
	params, err := json.Marshal(e.Params)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	gpus := make([]string, len(e.GPUs))
	for i, g := range e.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	devices := strings.Join(gpus, ",")
	return []string{
		"RB_TRIAL_ID=" + e.TrialID,
		"RB_EXPERIMENT=" + e.Experiment,
		"RB_PARAMS=" + string(params),
		"RB_START_ITER=" + strconv.Itoa(e.StartIter),
		"RB_TARGET_ITER=" + strconv.Itoa(e.TargetIter),
		"RB_CHECKPOINT_DIR=" + e.CheckpointDir,
		"RB_GPUS=" + devices,
		"CUDA_VISIBLE_DEVICES=" + devices,
		"RANK=" + strconv.Itoa(e.Rank),
		"WORLD_SIZE=" + strconv.Itoa(e.WorldSize),
		"LOCAL_RANK=" + strconv.Itoa(e.LocalRank),
		"MASTER_ADDR=" + e.MasterAddr,
		"MASTER_PORT=" + strconv.Itoa(e.MasterPort),
	}, nil
}

// ReportPrefix starts every report line a trainer prints on standard output.
const ReportPrefix = "@rb "

// A reused worker (spec trainer.reuse) serves one trial after another in one process, so that
// its start-up (an interpreter, imports, a dataset) is paid once per slot instead of once per
// launch. Its first trial comes in its environment, as for any worker, with ReuseVar set; where
// an ordinary worker would exit, it prints an end line (EndPrefix and the exit code it would have
// had, "@rb-end 0"), then reads the next trial from standard input: one line holding a JSON
// object of environment variables (the same ones, RB_TRIAL_ID to MASTER_PORT, plus the spec's
// trainer.env) to set before training it. It exits at the end of its input, after SIGTERM, and
// after a run that failed. A worker that ignores ReuseVar and exits is simply not reused.
const (
	ReuseVar  = "RB_REUSE"
	EndPrefix = "@rb-end "
)

// ParseEnd reads a reused worker's end line: ok is false for any other line.
func ParseEnd(line string) (code int, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), EndPrefix)
	if !ok {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil {
		return 0, false
	}
	return code, true
}

// Assignment is the line that hands a reused worker its next trial: vars (KEY=VALUE, as Vars
// returns them) as one JSON object and a line ending.
func Assignment(vars []string) ([]byte, error) {
	m := make(map[string]string, len(vars))
	for _, kv := range vars {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("assignment: %q is not KEY=VALUE", kv)
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("assignment: %w", err)
	}
	return append(b, '\n'), nil
}

// MaxReportLine is the longest report line, in bytes without its line ending, that is parsed:
// a trainer's output is read in bounded memory, so a longer line still reaches the log intact
// (streamed, never held whole) but, when it starts with ReportPrefix, is rejected as a report
// (ErrReportTooLong) rather than half read. Lines that are not reports may be of any length, and
// nothing before a report line changes how it is read.
const MaxReportLine = 64 << 10

// ErrReportTooLong means a report line is longer than MaxReportLine.
var ErrReportTooLong = errors.New("report line too long")

// Report is one progress report: the iteration reached and the metrics measured there.
type Report struct {
	Iter    int                `json:"iter"`
	Metrics map[string]float64 `json:"metrics"`
	// At is when the driver read the line.
	At time.Time `json:"at"`
}

// ErrNotReport means a line is the trainer's own output, not a report.
var ErrNotReport = errors.New("not a report line")

// ParseReport reads one line of a trainer's output. Lines without the "@rb " prefix are
// ErrNotReport; a prefixed line must hold exactly one JSON object with an integer "iter" >= 0 and
// otherwise only finite numbers, else it is an error (the caller logs it and goes on). An optional
// "at" (Unix seconds) says when the line was printed; it is not a metric. ScanReports parses only
// report lines of at most MaxReportLine bytes.
func ParseReport(line string) (Report, error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), ReportPrefix)
	if !ok {
		return Report{}, ErrNotReport
	}
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return Report{}, fmt.Errorf("report %q: not a JSON object: %w", rest, err)
	}
	if dec.More() {
		return Report{}, fmt.Errorf("report %q: text after the JSON object", rest)
	}
	num, ok := obj["iter"].(json.Number)
	if !ok {
		return Report{}, fmt.Errorf("report %q: no integer \"iter\"", rest)
	}
	iter, err := num.Int64()
	if err != nil || iter < 0 || iter > math.MaxInt32 {
		return Report{}, fmt.Errorf("report %q: \"iter\" %s is not an iteration number", rest, num)
	}
	r := Report{Iter: int(iter), Metrics: map[string]float64{}}
	if at, ok := obj["at"].(json.Number); ok {
		r.At = unixSeconds(string(at))
	}
	for k, v := range obj {
		if k == "iter" || k == "at" {
			continue
		}
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return Report{}, fmt.Errorf("report %q: %q is not a finite number", rest, k)
		}
		r.Metrics[k] = f
	}
	return r, nil
}

// FormatReport is the line a trainer prints for a report (what rbtrain writes).
func FormatReport(iter int, metrics map[string]float64) string {
	var b bytes.Buffer
	b.WriteString(ReportPrefix + `{"iter":` + strconv.Itoa(iter))
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, _ := json.Marshal(k)
		b.WriteString("," + string(name) + ":" + strconv.FormatFloat(metrics[k], 'g', -1, 64))
	}
	b.WriteString("}")
	return b.String()
}

// Exit codes of a trainer.
const (
	// ExitReached: the target iteration was reached and a checkpoint written.
	ExitReached = 0
	// Any other exit code, or death by a signal, is a failure: the trial is retried from its last
	// checkpoint while retries last.
)

// GracePeriod is how long a trainer has, after SIGTERM, to write a checkpoint and exit before it
// is killed.
const GracePeriod = 10 * time.Second

// StampReport adds "at" (now) to a report line that has none, so that a report relayed through
// logs keeps the time it was printed. Other lines are returned unchanged.
func StampReport(line string, now time.Time) string {
	rest, ok := strings.CutPrefix(line, ReportPrefix+"{")
	if !ok || strings.Contains(line, `"at"`) {
		return line
	}
	stamp := `"at":` + strconv.FormatFloat(float64(now.UnixNano())/1e9, 'f', 6, 64)
	if strings.HasPrefix(strings.TrimSpace(rest), "}") {
		return ReportPrefix + "{" + stamp + rest
	}
	return ReportPrefix + "{" + stamp + "," + rest
}

// unixSeconds reads "1700000000.25" to the nanosecond (a float64 cannot hold it); zero when it
// is not such a number.
func unixSeconds(s string) time.Time {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec <= 0 || len(frac) > 9 {
		return time.Time{}
	}
	ns := int64(0)
	if frac != "" {
		n, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err != nil {
			return time.Time{}
		}
		ns = n
	}
	return time.Unix(sec, ns)
}
