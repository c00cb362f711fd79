package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/urfave/cli/v2"
)

// rootFlag names the folder that holds all runs: `run` makes ROOT/NAME, and every command that
// takes a RUN finds it there by name or ID.
func rootFlag() cli.Flag {
	return &cli.StringFlag{Name: "root", EnvVars: []string{"RUBBERBAND_ROOT"}, Value: ".rubberband",
		Usage: "the folder that holds all runs, one directory each"}
}

// resolveRun finds the state directory a RUN argument means: a directory holding a run, a run's
// name under root, or a run's ID (or an unambiguous prefix of one) under root.
func resolveRun(root, arg string) (string, error) {
	isRun := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "run.json"))
		return err == nil
	}
	if isRun(arg) {
		return arg, nil
	}
	if !strings.ContainsRune(arg, filepath.Separator) && isRun(filepath.Join(root, arg)) {
		return filepath.Join(root, arg), nil
	}
	var matches []string
	for _, dir := range runDirs(root) {
		b, err := os.ReadFile(filepath.Join(dir, "run.json"))
		var rf runFile
		if err != nil || json.Unmarshal(b, &rf) != nil {
			continue
		}
		if rf.RunID == arg || (len(arg) >= 4 && strings.HasPrefix(rf.RunID, arg)) {
			matches = append(matches, dir)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", usageErr("no run %q: not a run's directory, nor a run's name or ID under %s (`rubberband list` shows them)", arg, root)
	default:
		return "", usageErr("%q is the start of several runs' IDs (%s): give more of it", arg, strings.Join(matches, ", "))
	}
}

// runDirs are the directories under root that hold a run, in name order.
func runDirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "run.json")); e.IsDir() && err == nil {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// openRun resolves the command's RUN argument and loads its state.
func openRun(c *cli.Context) (*state, error) {
	if c.NArg() < 1 {
		return nil, usageErr("%s needs a RUN argument: a run's name or ID under %s, or its directory", c.Command.Name, c.String("root"))
	}
	dir, err := resolveRun(c.String("root"), c.Args().First())
	if err != nil {
		return nil, err
	}
	return openState(dir)
}

// runView is a run as list and status show it: its state directory's journal replayed.
type runView struct {
	st     *state
	res    *executor.Result
	events []executor.Event
	live   bool
}

// viewRun replays a run's journal. A run no driver holds is measured up to its last event, so
// its elapsed time and cost stop growing once it stopped.
func viewRun(st *state) (*runView, error) {
	_, live, err := executor.ReadHolder(st.dir)
	if err != nil {
		return nil, err
	}
	events, err := executor.ReadJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	v := &runView{st: st, events: events, live: live}
	if len(events) == 0 {
		return v, nil
	}
	cfg := executor.Config{Experiment: st.exp, Alloc: st.alloc, Past: events, TimeScale: st.run.TimeScale}
	if !live {
		last := events[len(events)-1].At
		cfg.Now = func() time.Time { return last }
	}
	if v.res, err = executor.Replay(cfg); err != nil {
		return nil, err
	}
	return v, nil
}

// status is one word for where a run is, with why when it stopped short.
func (v *runView) status() (word, why string) {
	switch {
	case v.live && v.res == nil:
		return "starting", ""
	case v.live:
		return "running", ""
	case v.res == nil:
		return "not started", ""
	case v.res.Cancelled != "":
		return "cancelled", v.res.Cancelled
	case v.res.Finished:
		return "finished", ""
	case v.res.Stopped == "interrupted":
		return "interrupted", ""
	case v.res.Stopped != "":
		return "failed", v.res.Stopped
	default:
		return "interrupted", "its driver died" // no stop journaled: killed, or its machine went down
	}
}

// stages is how many stages have synced, of how many.
func (v *runView) stages() (synced, total int) {
	for _, b := range v.st.exp.Algorithm.Brackets() {
		total += len(b.Stages)
	}
	for _, e := range v.events {
		if e.Ev == executor.EvSync {
			synced++
		}
	}
	return min(synced, total), total
}

// best is the chosen trial's metric once the run finished, else the best reported so far.
func (v *runView) best() (trialID string, metric float64, ok bool) {
	if v.res == nil {
		return "", 0, false
	}
	if v.res.Best != nil {
		return v.res.Best.Trial, v.res.Best.Metric, true
	}
	name, max := v.st.exp.Objective.Metric, v.st.exp.Objective.Mode == "max"
	for _, t := range v.res.Trials {
		m, has := t.Metrics[name]
		if !has || math.IsNaN(m) {
			continue
		}
		if !ok || (max && m > metric) || (!max && m < metric) {
			trialID, metric, ok = t.ID, m, true
		}
	}
	return trialID, metric, ok
}

// runSummary is one row of `list`.
type runSummary struct {
	Name      string    `json:"name"`
	RunID     string    `json:"run_id"`
	Dir       string    `json:"dir"`
	Backend   string    `json:"backend"`
	Status    string    `json:"status"`
	Why       string    `json:"why,omitempty"`
	Stages    int       `json:"stages_synced"`
	Of        int       `json:"stages"`
	Started   time.Time `json:"started,omitzero"`
	ElapsedS  float64   `json:"elapsed_s"`
	CostUSD   float64   `json:"cost_usd"`
	Metric    string    `json:"metric"`
	Best      *float64  `json:"best,omitempty"`
	BestTrial string    `json:"best_trial,omitempty"`
}

func (v *runView) summary() runSummary {
	s := runSummary{Name: filepath.Base(v.st.dir), RunID: v.st.run.RunID, Dir: v.st.dir, Backend: v.st.run.Backend, Metric: v.st.exp.Objective.Metric}
	s.Status, s.Why = v.status()
	s.Stages, s.Of = v.stages()
	if len(v.events) > 0 {
		s.Started = v.events[0].At
	}
	if v.res != nil {
		s.ElapsedS, s.CostUSD = v.res.Realized.JCT, v.res.Realized.Cost
	}
	if id, m, ok := v.best(); ok {
		s.Best, s.BestTrial = &m, id
	}
	return s
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:    "list",
		Aliases: []string{"ls"},
		Usage:   "list the runs under the root folder: status, stage, elapsed time, cost so far, best metric",
		Flags:   []cli.Flag{rootFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usageErr("list takes no arguments (--root chooses the folder)")
			}
			rows := []runSummary{}
			for _, dir := range runDirs(c.String("root")) {
				st, err := openState(dir)
				var v *runView
				if err == nil {
					v, err = viewRun(st)
				}
				if err != nil { // one damaged run does not hide the others
					rows = append(rows, runSummary{Name: filepath.Base(dir), Dir: dir, Status: "unreadable", Why: err.Error()})
					continue
				}
				rows = append(rows, v.summary())
			}
			sort.SliceStable(rows, func(i, j int) bool { return rows[i].Started.Before(rows[j].Started) })
			if c.String("output") == "json" {
				return writeJSON(c.App.Writer, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.App.Writer, "no runs under %s\n", c.String("root"))
				return nil
			}
			var buf bytes.Buffer
			tw := newTable(&buf, "NAME", "RUN ID", "BACKEND", "STATUS", "STAGES", "STARTED", "ELAPSED", "COST", "BEST")
			for _, r := range rows {
				best := "-"
				if r.Best != nil {
					best = fmt.Sprintf("%s %.4g", r.Metric, *r.Best)
				}
				status := r.Status
				if r.Why != "" && r.Status != "interrupted" {
					status += ": " + shorten(r.Why, 40)
				}
				tw.row(r.Name, r.RunID, r.Backend, status, fmt.Sprintf("%d/%d", r.Stages, r.Of), ago(r.Started), clock(r.ElapsedS), money(r.CostUSD), best)
			}
			tw.flush()
			_, err := c.App.Writer.Write(buf.Bytes())
			return err
		},
	}
}

// ago is how long ago t was, as `nomad job status` and `sky status` print it.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return t.Local().Format("2006-01-02")
	}
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}
}

func checkOutput(c *cli.Context) error {
	if o := c.String("output"); o != "table" && o != "json" {
		return usageErr("--output %q is not a format (table or json)", o)
	}
	return nil
}

// completeRun completes a RUN argument with the names of the runs under the root (flags as usual).
func completeRun(c *cli.Context) {
	if n := len(os.Args); n > 2 && strings.HasPrefix(os.Args[n-2], "-") || c.NArg() > 0 {
		cli.DefaultCompleteWithFlags(c.Command)(c)
		return
	}
	for _, dir := range runDirs(c.String("root")) {
		fmt.Fprintln(c.App.Writer, filepath.Base(dir))
	}
}
