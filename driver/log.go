package driver

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/term"
)

// Log writes a run's messages and its live progress line to the terminal (or a log shipper),
// and every message, stamped, to the run's driver log (`rubberband logs RUN`). Brackets report
// from their own goroutines: mu keeps lines whole.
type Log struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	file    io.Writer // the driver log; nil: none
	runID   string
	json    *slog.Logger // JSON lines on w: every message and progress report
	last    time.Time
	pending bool
	stage   string // the bracket's stage last reported, to note each new one in the driver log
}

// NewLog writes to w (as JSON lines when json), and to file, the driver log, when not nil.
func NewLog(w io.Writer, json bool, file io.Writer, runID string) *Log {
	l := &Log{w: w, tty: term.Writes(w), file: file, runID: runID}
	if json {
		l.json = slog.New(slog.NewJSONHandler(w, nil)).With("run", runID)
	}
	return l
}

// Note writes a line to the driver log only: what a later reader needs, not the terminal.
func (l *Log) Note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Write(stampLines([]byte(fmt.Sprintf(format, args...)), time.Now(), l.runID))
	}
}

func (l *Log) Write(p []byte) (int, error) {
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

// Progress shows where a bracket is: redrawn in place on a terminal (at most five times a
// second), a line elsewhere, a JSON record with --log-format json; each new stage is noted in
// the driver log. Stages are numbered from 1. The ETA is the latest forecast's, else the plan's.
func (l *Log) Progress(s runstate.Status, predictedJCT float64) {
	if s.Forecast > 0 {
		predictedJCT = s.Forecast
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < 200*time.Millisecond && s.Done < s.Total {
		return
	}
	l.last = time.Now()
	eta := max(0, predictedJCT-s.Elapsed.Seconds())
	stage := fmt.Sprintf("[%s] stage %d/%d", s.Bracket, s.Stage+1, s.Stages)
	line := fmt.Sprintf("%s: %d/%d trials done", stage, s.Done, s.Total)
	if s.Rungs { // ASHA's rungs have no barrier: results pass what a rung holds at the least
		stage = fmt.Sprintf("[%s] rung %d/%d", s.Bracket, s.Stage+1, s.Stages)
		line = fmt.Sprintf("%s: %s (it holds %d at the least)", stage, format.Plural(s.Done, "result"), s.Total)
	}
	if stage != l.stage && l.file != nil {
		l.stage = stage
		l.file.Write(stampLines([]byte(line+fmt.Sprintf(" · elapsed %s · %s so far", format.Clock(s.Elapsed.Seconds()), format.Money(s.Cost))), time.Now(), l.runID))
	}
	if l.json != nil {
		l.json.Info("progress", "bracket", s.Bracket, "stage", s.Stage+1, "stages", s.Stages, "done", s.Done, "total", s.Total,
			"failed", s.Failed, "elapsed_s", s.Elapsed.Seconds(), "eta_s", eta, "cost", s.Cost, "running", s.Running, "iters", s.Iters, "starting", s.Starting)
		return
	}
	if s.Failed > 0 {
		line += fmt.Sprintf(" (%d failed)", s.Failed)
	}
	if s.Running > 0 {
		line += fmt.Sprintf(" · %d running", s.Running)
	}
	if s.Starting > 0 {
		line += fmt.Sprintf(" · waiting for %s to start", format.Plural(s.Starting, "node"))
	}
	switch {
	case s.ItersTotal > 0:
		line += fmt.Sprintf(" · %d/%d iterations", s.Iters, s.ItersTotal)
	case s.Iters > 0:
		line += fmt.Sprintf(" · %s", format.Plural(s.Iters, "iteration"))
	}
	line += fmt.Sprintf(" · elapsed %s · ETA %s · %s so far", format.Clock(s.Elapsed.Seconds()), format.Clock(eta), format.Money(s.Cost))
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K%s", line)
		l.pending = true
		return
	}
	fmt.Fprintln(l.w, line)
}

// Done clears the progress line.
func (l *Log) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
}

func (l *Log) clear() {
	if l.pending {
		fmt.Fprint(l.w, "\r\033[K")
		l.pending = false
	}
}

// stampLines prefixes every line of p with the time and the run's ID, for the driver log:
// whoever reads it later can tell the drivers of one run apart and line them up with the
// journal.
func stampLines(p []byte, now time.Time, runID string) []byte {
	var out bytes.Buffer
	prefix := now.UTC().Format("2006-01-02T15:04:05.000Z") + " " + runID + " "
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) > 0 {
			out.WriteString(prefix)
			out.Write(line)
		}
	}
	if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes()
}
