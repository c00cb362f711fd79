package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
)

// WriteTable writes a run's report as tables a person reads (what `run`, `status` and `report`
// print): its status, best trial, stages predicted beside realized (numbered from 1, as people
// count them; JSON keeps the index from 0), interruptions, re-plans and totals.
func WriteTable(w io.Writer, st *State, res *runstate.Result, status string) {
	rep := runstate.Compare(st.Plan, res)
	fmt.Fprintf(w, "%s · run %s · %s · state in %s\n\n", res.Experiment, res.RunID, status, st.Dir)
	if res.Best != nil {
		params, _ := json.Marshal(res.Best.Params)
		fmt.Fprintf(w, "best trial %s: %s %.4f with %s\n\n", res.Best.Trial, st.Exp.Objective.Metric, res.Best.Metric, params)
	}
	if st.Exp.MultiObjective() {
		writeFront(w, st, res.Pareto)
	}
	if st.ASHA != nil {
		writeASHA(w, res)
	} else {
		var buf bytes.Buffer
		tw := format.NewTable(&buf, "BRACKET", "STAGE", "TRIALS", "ITERS", "GPUS", "NODES", "DONE", "FAILED", "PRED TIME", "TIME", "ΔTIME", "PRED COST", "COST", "ΔCOST")
		for _, s := range rep.Stages {
			dTime, dCost := "-", "-"
			if t, c, ok := s.Off(); ok {
				dTime, dCost = fmt.Sprintf("%+.1f%%", t), fmt.Sprintf("%+.1f%%", c)
			}
			tw.Row(s.Bracket, s.Stage+1, s.Realized.Trials, s.Realized.Iters, s.Realized.GPUs, s.Realized.Nodes, s.Realized.Done, s.Realized.Failed,
				format.Clock(s.Predicted.Duration), format.Clock(s.Realized.Duration), dTime, format.Money(s.Predicted.Cost), format.Money(s.Realized.Cost), dCost)
		}
		tw.Flush()
		w.Write(buf.Bytes())
	}
	if len(rep.Interruptions) > 0 {
		lost := 0
		for _, s := range rep.Stages {
			lost += s.Realized.Interrupted
		}
		fmt.Fprintf(w, "\n%s; %s relaunched from their checkpoints:\n", format.Plural(len(rep.Interruptions), "spot interruption"), format.Plural(lost, "gang"))
		for _, in := range rep.Interruptions {
			fmt.Fprintf(w, "  %s  %s %v: %s\n", format.Clock(in.At), in.Bracket, in.Nodes, in.Why)
		}
	}
	writeRevisions(w, st, rep)
	fmt.Fprintf(w, "\npredicted  JCT %s   cost %s\n", format.Clock(rep.Predicted.JCT), format.Money(rep.Predicted.Cost))
	// A run that re-planned is held to the plan it followed: its last revision's forecast.
	against, of := rep.Predicted, ""
	if r := rep.Replanned; r != nil {
		fmt.Fprintf(w, "re-planned JCT %s   cost %s   (forecast at the last re-plan, %s)\n", format.Clock(r.JCT), format.Money(r.Cost), format.Clock(rep.Revisions[len(rep.Revisions)-1].At))
		against, of = *r, fmt.Sprintf(" against the re-plan; %+.1f%% time, %+.1f%% cost against the first plan",
			format.Pct(rep.Realized.JCT, rep.Predicted.JCT), format.Pct(rep.Realized.Cost, rep.Predicted.Cost))
	}
	if !rep.Finished {
		// Part of a run is not set against the whole of a prediction: -65% time is not a saving.
		fmt.Fprintf(w, "so far     JCT %s   cost %s   (not finished: set against the prediction once it is)\n",
			format.Clock(rep.Realized.JCT), format.Money(rep.Realized.Cost))
	} else {
		fmt.Fprintf(w, "realized   JCT %s   cost %s   (%+.1f%% time, %+.1f%% cost%s)\n",
			format.Clock(rep.Realized.JCT), format.Money(rep.Realized.Cost), format.Pct(rep.Realized.JCT, against.JCT), format.Pct(rep.Realized.Cost, against.Cost), of)
	}
	if rep.DeadlineMissed {
		fmt.Fprintf(w, "DEADLINE MISSED by %s: the run took %s against the deadline %s (the result above stands)\n",
			format.Clock(rep.MissedByS), format.Clock(rep.Realized.JCT), format.Clock(rep.DeadlineS))
	}
	writeSaving(w, st, rep)
}

// writeSaving says what elasticity saved, like with like: the plan's predicted cost against the
// best static cluster's predicted cost, and the run's realized cost against that cluster
// re-costed on the latencies the run observed (runstate.Recost: a profile that was wrong is not
// elasticity). A plan whose cluster never changes saves nothing by elasticity, and says so.
func writeSaving(w io.Writer, st *State, rep runstate.Report) {
	p := st.Plan
	if p.Static == nil || p.SavingPct == nil || !rep.Finished || st.ASHA != nil {
		return
	}
	brackets := st.Exp.Algorithm.Brackets()
	static, err := (&planner.Report{Brackets: p.Static.Brackets}).Alloc(brackets)
	if err != nil {
		return
	}
	nodes := 0
	for _, b := range static {
		nodes += b[0].Nodes
	}
	cluster := format.Plural(nodes, "node")
	if len(rep.Revisions) == 0 && sameCluster(static, st.Alloc) {
		fmt.Fprintf(w, "static     the plan is the best static cluster (%s): no elastic saving\n", cluster)
		return
	}
	fmt.Fprintf(w, "static     the best static cluster (%s) is predicted to cost %s: the elastic plan, predicted at %s, saves %.1f%%\n",
		cluster, format.Money(p.Static.Predicted.Cost.Mean), format.Money(rep.Predicted.Cost), *p.SavingPct)
	recost, err := recostStatic(st, static)
	if err != nil {
		return // the journal is not here to read (a copy of the report alone): the prediction stands
	}
	fmt.Fprintf(w, "           re-costed on the latencies this run observed it costs %s: the elastic plan, realized at %s, saved %.1f%%\n",
		format.Money(recost.Cost), format.Money(rep.Realized.Cost), -format.Pct(rep.Realized.Cost, recost.Cost))
}

// sameCluster says two plans hold the same nodes at every stage: the one's cluster is the
// other's, whatever GPUs each trial gets on it.
func sameCluster(a, b sim.Alloc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k, x := range a[i] {
			y := b[i][k]
			if x.Nodes != y.Nodes || x.Type != y.Type || x.Market != y.Market || x.OnDemand != y.OnDemand {
				return false
			}
		}
	}
	return true
}

// recostStatic is the static plan re-costed on what the run in st observed (its journal).
func recostStatic(st *State, static sim.Alloc) (runstate.Measured, error) {
	f, err := NewFold(st) // folded as read: a 100,000-trial journal's events are not kept
	if err != nil {
		return runstate.Measured{}, err
	}
	if err := journal.Scan(filepath.Join(st.Dir, Journal), func(e journal.Event) { f.Apply(e) }); err != nil {
		return runstate.Measured{}, err
	}
	if f.seen.events == 0 {
		return runstate.Measured{}, errors.New("re-cost: an empty journal")
	}
	return f.s.Recost(f.seen.last, static)
}

// RungRow is one rung of an ASHA run, as status and the dashboard show it: how many results it
// holds (a rung holds as many as trials reach it, not the synchronous stage's share), how many it
// promoted, and when its first try began and its last result came (spec seconds).
type RungRow struct {
	Bracket                                 string
	Rung, ToIter, Results, Promoted, Failed int
	First, Last                             float64
}

// ASHARungs are an ASHA run's rungs that trials reached (the first always).
func ASHARungs(res *runstate.Result) []RungRow {
	var rows []RungRow
	for _, b := range res.Brackets {
		iter := 0
		for k, r := range b.Stages {
			iter += r.Iters
			if r.Done == 0 && r.Failed == 0 && r.Start == 0 && k > 0 {
				continue // never reached
			}
			rows = append(rows, RungRow{Bracket: b.Name, Rung: k + 1, ToIter: iter, Results: r.Done, Promoted: len(r.Promoted), Failed: r.Failed,
				First: r.Start, Last: r.Start + r.Duration})
		}
	}
	return rows
}

// writeASHA writes an ASHA run's rungs (results and promotions so far: they overlap in time)
// and the phases of its GPU schedule, which its cost is split among.
func writeASHA(w io.Writer, res *runstate.Result) {
	var buf bytes.Buffer
	tw := format.NewTable(&buf, "BRACKET", "RUNG", "TO ITER", "RESULTS", "PROMOTED", "FAILED", "FIRST", "LAST RESULT")
	for _, r := range ASHARungs(res) {
		tw.Row(r.Bracket, r.Rung, r.ToIter, r.Results, r.Promoted, r.Failed, format.Clock(r.First), format.Clock(r.Last))
	}
	tw.Flush()
	buf.WriteString("\n")
	tw = format.NewTable(&buf, "PHASE", "GPUS", "NODES", "START", "TIME", "COST")
	for j, p := range res.Phases {
		tw.Row(j+1, p.GPUs, p.Nodes, format.Clock(p.Start), format.Clock(p.Duration), format.Money(p.Cost))
	}
	tw.Flush()
	w.Write(buf.Bytes())
}

// writeRevisions lists the run's re-plans, and, while it runs, its latest forecast against the
// deadline and the budget.
func writeRevisions(w io.Writer, st *State, rep runstate.Report) {
	if len(rep.Revisions) > 0 {
		fmt.Fprintf(w, "\n%s:\n", format.Plural(len(rep.Revisions), "re-plan"))
		for _, r := range rep.Revisions {
			fmt.Fprintf(w, "  %s  %s: %s\n            GPUs %v -> %s; forecast JCT %s -> %s (P(miss) %.0f%% -> %.0f%%), cost %s -> %s\n",
				format.Clock(r.At), r.Where(), r.Reason, r.GPUsBefore, r.NewPlan(), format.Clock(r.Before.JCT), format.Clock(r.After.JCT),
				100*r.Before.MissProb, 100*r.After.MissProb, format.Money(r.Before.Cost), format.Money(r.After.Cost))
			if r.DeadlineGivesWay {
				fmt.Fprintf(w, "            the deadline gives way to the budget\n")
			}
		}
	}
	if f := rep.Forecast; f != nil && !rep.Finished {
		fmt.Fprintf(w, "\nforecast   JCT %s (deadline %s, P(miss) %.0f%%)   cost %s", format.Clock(f.JCT), format.Clock(st.Exp.Deadline.D().Seconds()), 100*f.MissProb, format.Money(f.Cost))
		if b := st.Exp.Budget.MaxCostUSD; b > 0 {
			word := "within"
			if f.Cost > b {
				word = "OVER"
			}
			fmt.Fprintf(w, " (%s the budget %s)", word, format.Money(b))
		}
		fmt.Fprintln(w)
		if warn := runstate.DeadlineWarning(f, st.Exp.Deadline.D().Seconds(), st.Exp.Planner.DeadlineQuantile); warn != "" {
			fmt.Fprintf(w, "DEADLINE: %s\n", warn)
		}
	}
}

// WriteTrials writes one row per trial: how far it got, where it is, its last metric and node.
func WriteTrials(w io.Writer, st *State, res *runstate.Result) {
	brackets := st.Exp.Algorithm.Brackets()
	metric := st.Exp.Objective.Metric
	tw := format.NewTable(w, "TRIAL", "BRACKET", "STAGES DONE", "STATE", "ITER", strings.ToUpper(metric), "NODE")
	for _, t := range res.Trials {
		m := "-"
		if v, ok := t.Metrics[metric]; ok {
			m = fmt.Sprintf("%.4g", v)
		}
		state := string(t.State)
		if t.Failed {
			state += " (failed)"
		}
		node := "-"
		if len(t.Nodes) > 0 {
			node = strings.Join(t.Nodes, ",")
		}
		tw.Row(t.ID, brackets[t.Bracket].Name, fmt.Sprintf("%d/%d", t.Stages, len(brackets[t.Bracket].Stages)), state, t.Iter, m, node)
	}
	tw.Flush()
}

// frontShown is how many of a Pareto front the report lists; best lists it all.
const frontShown = 10

// writeFront lists a multi-objective run's Pareto front in a line per configuration: its
// objectives and constrained metrics, in the spec's order.
func writeFront(w io.Writer, st *State, front []runstate.ParetoTrial) {
	if len(front) == 0 {
		fmt.Fprintf(w, "Pareto front: no feasible result yet\n\n")
		return
	}
	fmt.Fprintf(w, "Pareto front: %d configuration(s) at iteration %d (best lists them all with their parameters)\n", len(front), front[0].Iter)
	for i, p := range front {
		if i == frontShown {
			fmt.Fprintf(w, "  … %d more\n", len(front)-frontShown)
			break
		}
		var parts []string
		for _, m := range st.Exp.Metrics() {
			if v, ok := p.Metrics[m]; ok {
				parts = append(parts, fmt.Sprintf("%s %.4g", m, v))
			}
		}
		fmt.Fprintf(w, "  %s  %s\n", p.Trial, strings.Join(parts, "  "))
	}
	fmt.Fprintln(w)
}
