package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/urfave/cli/v2"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "report on a finished or running run, with pictures",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"},
			&cli.StringFlag{Name: "plots", Usage: "write curves.png, gantt-planned.png, gantt-realized.png and cost.png into this directory"},
		},
		Action: reportAction,
	}
}

func reportAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("%s needs exactly one DIR argument", c.Command.Name)
	}
	st, err := openState(c.Args().First())
	if err != nil {
		return err
	}
	events, err := executor.ReadJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	res, err := executor.Replay(executor.Config{Experiment: st.exp, Alloc: st.alloc, Past: events, TimeScale: st.run.TimeScale})
	if err != nil {
		return err
	}
	if dir := c.String("plots"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := drawRunPlots(dir, st, res, events); err != nil {
			return err
		}
	}
	return printRun(c, st, res)
}

func drawRunPlots(dir string, st *state, res *executor.Result, events []executor.Event) error {
	metric := st.exp.Objective.Metric
	// Learning curves, promotions marked where each sync kept the trial.
	points := map[string][][2]float64{}
	var order []string
	for _, e := range events {
		if e.Ev != executor.EvReport {
			continue
		}
		v, ok := e.Metrics[metric]
		if !ok {
			continue
		}
		if _, seen := points[e.Trial]; !seen {
			order = append(order, e.Trial)
		}
		points[e.Trial] = append(points[e.Trial], [2]float64{float64(e.Iter), v})
	}
	brackets := st.exp.Algorithm.Brackets()
	var curves []charts.Curve
	index := map[string]int{}
	for _, id := range order {
		pts := points[id]
		sort.SliceStable(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
		var cv charts.Curve
		for _, p := range pts {
			cv.X, cv.Y = append(cv.X, p[0]), append(cv.Y, p[1])
		}
		index[id] = len(curves)
		curves = append(curves, cv)
	}
	for _, e := range events {
		if e.Ev != executor.EvSync || e.Stage+1 >= len(brackets[e.Bracket].Stages) {
			continue
		}
		end := float64(brackets[e.Bracket].Stages[e.Stage].EndIter())
		for _, id := range e.Keep {
			i, ok := index[id]
			if !ok {
				continue
			}
			for j := len(curves[i].X) - 1; j >= 0; j-- {
				if curves[i].X[j] <= end {
					curves[i].Marks = append(curves[i].Marks, j)
					break
				}
			}
		}
	}
	if err := charts.Curves(filepath.Join(dir, "curves.png"), fmt.Sprintf("%s: learning curves of %d trials", st.exp.Name, len(curves)),
		metric, curves); err != nil {
		return err
	}
	// The planned schedule (one sampled run) beside the realized one.
	s, err := newSimulatorFor(st)
	if err != nil {
		return err
	}
	if err := drawGantt(filepath.Join(dir, "gantt-planned.png"), s, st.alloc, st.exp.Name+": planned schedule (one sampled run)"); err != nil {
		return err
	}
	rows, bars, ends := realizedSchedule(events, st.run.TimeScale, st.exp.Cluster.GPUsPerNode)
	if _, err := charts.Gantt(filepath.Join(dir, "gantt-realized.png"), st.exp.Name+": realized schedule", max(rows, 1), bars, ends); err != nil {
		return err
	}
	// Cost per stage, predicted against realized.
	rep := executor.Compare(st.plan, res)
	var cats []string
	var pred, real []float64
	for _, sr := range rep.Stages {
		cats = append(cats, fmt.Sprintf("%s/%d", sr.Bracket, sr.Stage))
		pred, real = append(pred, sr.Predicted.Cost), append(real, sr.Realized.Cost)
	}
	return charts.Paired(filepath.Join(dir, "cost.png"), st.exp.Name+": cost per stage", "cost (dollars)", cats, pred, real, "predicted", "realized")
}

// realizedSchedule lays the journal's launches out on the nodes they ran on: a bar from each
// launch to the trial's next result, on the first free GPUs of each node (the journal keeps
// nodes, not GPU indices); provisioning shaded from the stage's start to the node's first
// launch; the syncs as stage boundaries. Times are spec seconds from the run's start.
func realizedSchedule(events []executor.Event, timeScale float64, gpn int) (int, []charts.Bar, []float64) {
	var start time.Time
	rows := map[string]int{}
	row := func(id string) int {
		if r, ok := rows[id]; ok {
			return r
		}
		rows[id] = len(rows)
		return rows[id]
	}
	sec := func(t time.Time) float64 { return t.Sub(start).Seconds() / timeScale }
	stageStart := map[[2]int]time.Time{}
	lastStage := map[int]int{}
	pending := map[string]time.Time{} // node -> when it was asked for, until its first launch
	busy := map[string][]bool{}       // node -> GPUs in use
	type open struct {
		at    time.Time
		nodes []string
		lanes [][2]int
	}
	launched := map[string]open{}
	trialNo := map[string]int{}
	var bars []charts.Bar
	var ends []float64
	frac := func(i int) float64 { return float64(i) / float64(gpn) }
	for _, e := range events {
		switch e.Ev {
		case executor.EvStart:
			start = e.At
		case executor.EvStage:
			if _, ok := stageStart[[2]int{e.Bracket, e.Stage}]; !ok {
				stageStart[[2]int{e.Bracket, e.Stage}] = e.At
			}
			lastStage[e.Bracket] = e.Stage
		case executor.EvNodeUp:
			row(e.Node.ID)
			pending[e.Node.ID] = stageStart[[2]int{e.Bracket, lastStage[e.Bracket]}]
			busy[e.Node.ID] = make([]bool, gpn)
		case executor.EvLaunch:
			if _, ok := trialNo[e.Trial]; !ok {
				trialNo[e.Trial] = len(trialNo)
			}
			o := open{at: e.At, nodes: e.Nodes}
			per := max(1, e.GPUs/max(len(e.Nodes), 1))
			for _, n := range e.Nodes {
				if from, ok := pending[n]; ok {
					bars = append(bars, charts.Bar{Row: row(n), Start: sec(from), End: sec(e.At), Kind: "provision"})
					delete(pending, n)
				}
				lane := freeLanes(busy[n], per)
				o.lanes = append(o.lanes, [2]int{lane, per})
			}
			launched[e.Trial] = o
		case executor.EvDone, executor.EvFail:
			if o, ok := launched[e.Trial]; ok {
				for i, n := range o.nodes {
					l := o.lanes[i]
					bars = append(bars, charts.Bar{Row: row(n), Start: sec(o.at), End: sec(e.At), Kind: "train", Label: trialNo[e.Trial],
						Lo: frac(l[0]), Hi: frac(l[0] + l[1])})
					for g := l[0]; g < l[0]+l[1] && g < len(busy[n]); g++ {
						busy[n][g] = false
					}
				}
				delete(launched, e.Trial)
			}
		case executor.EvSync:
			ends = append(ends, sec(e.At))
		}
	}
	return len(rows), bars, ends
}

// freeLanes takes the first k free GPUs of a node (from 0 when none are known).
func freeLanes(gpus []bool, k int) int {
	for i := 0; i+k <= len(gpus); i++ {
		ok := true
		for g := i; g < i+k; g++ {
			ok = ok && !gpus[g]
		}
		if ok {
			for g := i; g < i+k; g++ {
				gpus[g] = true
			}
			return i
		}
	}
	return 0
}
