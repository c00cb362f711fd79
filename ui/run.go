package ui

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/palette"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// sections of the run page that a stream re-renders, each a template "sec-NAME".
var runSections = []string{"header", "progress", "gantt", "charts", "curves", "search", "pareto", "trials"}

// hub follows one run's journal for its pages: it reads what was appended (journal.Tail), replays
// it (rundir.ViewOf: the same state `status` shows) and re-renders the live sections once for
// all the pages open on the run.
type hub struct {
	s    *Server
	name string
	feed feed

	mu       sync.Mutex // serializes refreshes
	st       *rundir.State
	tail     *journal.Tail
	fold     *rundir.Fold // the journal folded, as it was read
	pf       *pageFold    // what the page draws of it besides
	live     bool
	err      error
	rendered time.Time
	// pollAfter is when the stream's poller may rebuild the page next (wall time): a page that
	// takes long to build (a 100,000-trial run's) is rebuilt at most once every few builds'
	// time, so that following a busy run costs the server part of a core, and a stream a few
	// updates a second at most.
	pollAfter time.Time
	// big is the size over which a live run's section is held back (bigSection), held how many
	// renderings each was held back since it was last sent.
	big     int
	held    map[string]int
	version int
	last    map[string]template.HTML
	page    *runPage
	res     *runstate.Result // the run as page shows it: what other pages of its trial table are cut from
	planned *sim.Schedule
}

func (s *Server) hub(name string) (*hub, error) {
	dir, ok := s.runDir(name)
	if !ok {
		return nil, fmt.Errorf("no run %q under %s: %w", name, s.cfg.Root, rundir.ErrNotRun)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hubs[dir]; h != nil {
		return h, nil
	}
	st, err := rundir.Open(dir)
	if err != nil {
		return nil, err
	}
	h := &hub{s: s, name: name, st: st, big: bigSection, held: map[string]int{}, tail: journal.NewTail(filepath.Join(st.Dir, rundir.Journal), 4<<20)}
	if sim, err := st.PlannedSchedule(); err == nil {
		h.planned = &sim
	}
	s.hubs[dir] = h
	return h, nil
}

// refresh reads what the journal gained and re-renders when anything changed; a live run is
// re-rendered at least every second (its elapsed time and cost grow without events).
func (h *hub) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Read up to the journal's end as it is now (a large run's journal is many of the tail's
	// reads; a page drawn from the first of them would show the run's start as the run), and
	// fold only what was appended.
	var evs []journal.Event // the last read's: whether anything was appended
	var err error
	for {
		before := h.tail.Line()
		more, nerr := h.tail.Next()
		if h.pf == nil || h.tail.Line() < before+len(more) { // new, or the journal was cut back and is read anew
			f, ferr := rundir.NewFold(h.st)
			if ferr != nil && nerr == nil {
				nerr = ferr
			}
			h.fold, h.pf = f, newPageFold(h.st.Exp)
		}
		for _, e := range more {
			h.pf.apply(h.fold, e)
		}
		if len(more) > 0 {
			evs = more
		}
		err = nerr
		if len(more) == 0 || err != nil {
			break
		}
	}
	_, live, herr := rundir.ReadHolder(h.st.Dir)
	if herr == nil && live != h.live {
		h.live = live
	} else if len(evs) == 0 && err == nil && h.err == nil && h.page != nil && (!h.live || h.s.cfg.Clock.Now().Sub(h.rendered) < time.Second) {
		return
	}
	h.err = err
	h.rendered = h.s.cfg.Clock.Now()
	began := time.Now()
	defer func() { h.pollAfter = time.Now().Add(pollSpacing * time.Since(began)) }()
	page := h.build()
	sections, changed := map[string]template.HTML{}, map[string]template.HTML{}
	for _, sec := range runSections {
		var buf bytes.Buffer
		if err := h.s.tmpl.ExecuteTemplate(&buf, "sec-"+sec, page); err != nil {
			fmt.Fprintf(h.s.cfg.Log, "ui: render %s: %v\n", sec, err)
			continue
		}
		html := template.HTML(buf.String()) // html/template's own output, escaped
		sections[sec] = html
		if h.last[sec] == html {
			continue
		}
		// A large section of a live run is sent every few versions, not with each: its latest
		// state is on the page a reload shows, and once the run stops it is sent at once.
		if old, ok := h.last[sec]; ok && h.live && len(html) > h.big && h.held[sec] < bigEvery {
			sections[sec] = old
			h.held[sec]++
			continue
		}
		changed[sec] = html
		delete(h.held, sec)
	}
	if len(changed) == 0 && h.page != nil {
		page.Version, h.page = h.version, page // what was held back is on a page opened now
		return
	}
	if h.page == nil {
		changed = nil
	}
	h.version++
	page.Version = h.version
	h.page, h.last = page, sections
	h.feed.publish(&update{Version: h.version, Seq: h.pf.events, Sections: sections, changed: changed})
}

// Pacing of a large run's stream: the poller waits pollSpacing times the last build's time
// between builds, and a live run's section over bigSection bytes that changes is sent once in
// bigEvery+1 renderings.
const (
	pollSpacing = 3
	bigSection  = 64 << 10
	bigEvery    = 5
)

// pollRefresh is refresh as the stream's poller calls it: not before pollAfter.
func (h *hub) pollRefresh() {
	h.mu.Lock()
	wait := time.Now().Before(h.pollAfter)
	h.mu.Unlock()
	if !wait {
		h.refresh()
	}
}

// current is the latest rendering, refreshed first.
func (h *hub) current() *runPage {
	h.refresh()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.page
}

// runPage is everything the run page shows.
type runPage struct {
	Name, RunID, Backend, Status, Why string
	Live                              bool
	Version, Seq                      int
	Error                             string
	Metric, Mode                      string
	ElapsedS, DeadlineS               float64
	CostUSD, PredCostUSD              float64
	PredCostP5, PredCostP95           float64
	PredJCT                           float64
	BudgetUSD                         float64
	Best                              *float64
	BestTrial                         string
	Done, Total, Failed               int
	Stages                            []stageRow
	// ASHA: an ASHA run's rungs and the phases of its GPU schedule, in place of stages (its
	// rungs overlap in time and hold as many results as trials reach them: no share of a
	// prediction or of the cost is theirs; the phases have the cost). RungsReached of Rungs.
	ASHA                     bool
	Rungs                    []rundir.RungRow
	Phases                   []runstate.PhaseResult
	RungsReached, RungsTotal int
	Planned, Realized        chart
	Cost, Time, Curves       chart
	Search                   searchSection
	Pareto                   *paretoSection // a multi-objective run's
	// Trials are one page of the trial table: TrialOffset to TrialEnd of TrialsTotal;
	// PrevOffset and NextOffset are the pages beside it (-1: none).
	Trials                             []trialRow
	TrialsTotal, TrialOffset, TrialEnd int
	TrialLimit, PrevOffset, NextOffset int
	OtherPage                          bool // not the stream's page (the first, TrialPage long)
	Revisions                          []revisionRow
	Forecast                           string // the latest forecast of the whole run, while it runs
	DeadlineWarning                    string // how that forecast misses the deadline ("" when it meets it)
	Spec                               string
	Plan                               string
	CanCancel                          bool
	CSRF                               string
}

type stageRow struct {
	Bracket                                   string
	Stage, Trials, Iters, GPUs, Nodes         int
	Done, Failed, Retries, Timeouts, Interrup int
	PredTime, Time, PredCost, Cost            float64
	State                                     string
}

// searchSection is what the search found: the best configuration, each parameter's importance
// and the objective against the most important parameters' values.
type searchSection struct {
	BestTrial   string
	BestParams  []paramValue
	Budget      int
	Importances []search.Importance
	Scatters    []chart
}

type paramValue struct{ Name, Value string }

// maxScatters is how many parameters get a scatter on the page: the most important.
const maxScatters = 3

func buildSearch(v *rundir.View, found *rundir.SearchSummary, metric string) searchSection {
	sec := searchSection{Budget: found.Budget, Importances: found.Importances}
	if b := found.Best; b != nil {
		sec.BestTrial = b.Trial
		for _, name := range slices.Sorted(maps.Keys(b.Params)) {
			sec.BestParams = append(sec.BestParams, paramValue{name, fmt.Sprint(b.Params[name])})
		}
	}
	if len(found.Importances) == 0 || found.Importances[0].Results < 2 {
		return sec
	}
	space := v.State.Exp.SearchSpace
	for i, imp := range found.Importances {
		if i == maxScatters {
			break
		}
		p := space[imp.Param]
		sr := series{Name: imp.Param, Dots: true}
		xFormat := func(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }
		for _, pt := range found.Points {
			raw, ok := pt.Params[imp.Param]
			if !ok {
				continue
			}
			x, ok := scatterX(p, raw)
			if !ok {
				continue
			}
			sr.X, sr.Y = append(sr.X, x), append(sr.Y, pt.Value)
			sr.Labels = append(sr.Labels, fmt.Sprintf("%s=%v: %s %.4g", imp.Param, raw, metric, pt.Value))
		}
		switch p.Type {
		case "loguniform":
			xFormat = func(x float64) string { return strconv.FormatFloat(math.Pow(10, x), 'g', 2, 64) }
		case "choice":
			xFormat = func(x float64) string {
				if i := int(math.Round(x)); i >= 0 && i < len(p.Values) && math.Abs(x-float64(i)) < 1e-9 {
					return fmt.Sprint(p.Values[i])
				}
				return ""
			}
		}
		sec.Scatters = append(sec.Scatters, lineChart("scatter-"+imp.Param, fmt.Sprintf("%s against %s at %d iterations (explains %.0f%%)", metric, imp.Param, found.Budget, 100*imp.Share),
			[]series{sr}, nil, nil, xFormat, func(y float64) string { return strconv.FormatFloat(y, 'g', 3, 64) }))
	}
	return sec
}

// scatterX places a value on a scatter's x axis: log10 for loguniform, a choice's index.
func scatterX(p spec.Param, v any) (float64, bool) {
	x, ok := search.AxisValue(p, v)
	if !ok || p.Type != "loguniform" {
		return x, ok
	}
	return math.Log10(x), x > 0
}

// revisionRow is one re-plan: when, of what, why, and what it changed and forecast.
type revisionRow struct {
	At                          float64
	Bracket, From               string
	Reason, Before, After, Said string
}

// TrialPage is how many trials the run page's table shows at once: a 100,000-trial run's
// table is paged (?offset=&limit=), not sent whole, nor with each update of the stream.
const TrialPage = 100

// MaxTrialPage is the most trials one page of the table may ask for.
const MaxTrialPage = 1000

// maxCurves is how many trials' learning curves the page draws: the best ones (the winner's is
// drawn besides); thousands of curves are a blur that costs megabytes.
const maxCurves = 50

// setTrials fills the trial table with trials [offset, offset+limit) of res, and the counts and
// offsets the table's pager shows.
func (p *runPage) setTrials(res *runstate.Result, brackets []spec.Bracket, offset, limit int) {
	p.Trials, p.TrialsTotal, p.TrialOffset, p.TrialEnd, p.TrialLimit = nil, 0, 0, 0, limit
	p.PrevOffset, p.NextOffset = -1, -1
	if res == nil {
		return
	}
	p.TrialsTotal = len(res.Trials)
	offset, end := rundir.PageBounds(p.TrialsTotal, offset, limit)
	p.TrialOffset, p.TrialEnd = offset, end
	if offset > 0 {
		p.PrevOffset = max(0, offset-limit)
	}
	if end < p.TrialsTotal {
		p.NextOffset = end
	}
	for _, t := range res.Trials[offset:end] {
		row := trialRow{ID: t.ID, Params: paramsText(t.Params), State: string(t.State), Iter: t.Iter, Metric: "-", Node: "-"}
		if t.Bracket < len(brackets) {
			row.Bracket = brackets[t.Bracket].Name
			row.Stages = fmt.Sprintf("%d/%d", t.Stages, len(brackets[t.Bracket].Stages))
		}
		if m, ok := t.Metrics[p.Metric]; ok {
			row.Metric = strconv.FormatFloat(m, 'g', 5, 64)
		}
		if t.Failed {
			row.State += " (failed)"
		}
		if len(t.Nodes) > 0 {
			row.Node = strings.Join(t.Nodes, ",")
		}
		p.Trials = append(p.Trials, row)
	}
}

// bestCurves are at most n of curves: those whose last value is best (highest when max), in
// their order.
func bestCurves(curves []rundir.Curve, max bool, n int) []rundir.Curve {
	return topN(curves, n, func(c rundir.Curve) float64 {
		if len(c.Y) == 0 || math.IsNaN(c.Y[len(c.Y)-1]) {
			return math.Inf(-1)
		}
		if max {
			return c.Y[len(c.Y)-1]
		}
		return -c.Y[len(c.Y)-1]
	})
}

type trialRow struct {
	ID, Bracket, Params, Stages, State, Metric, Node string
	Iter                                             int
}

func (h *hub) build() *runPage {
	st := h.st
	p := &runPage{Name: h.name, RunID: st.Run.RunID, Backend: st.Run.Backend, Live: h.live, Seq: h.pf.events,
		Metric: st.Exp.Objective.Metric, Mode: st.Exp.Objective.Mode, DeadlineS: st.Exp.Deadline.Seconds(),
		PredCostUSD: st.Plan.Predicted.Cost.Mean, PredCostP5: st.Plan.Predicted.Cost.P5, PredCostP95: st.Plan.Predicted.Cost.P95,
		PredJCT: st.Plan.Predicted.JCT.Mean, BudgetUSD: st.Exp.Budget.MaxCostUSD}
	if h.err != nil {
		p.Error = h.err.Error()
	}
	v := &rundir.View{State: st, Live: h.live}
	if h.fold != nil {
		v = h.fold.View(h.live, h.s.cfg.Clock)
	}
	p.Status, p.Why = v.Status()
	if id, m, ok := v.Best(); ok {
		p.Best, p.BestTrial = &m, id
	}
	brackets := st.Exp.Algorithm.Brackets()
	now := h.s.cfg.Clock.Now()
	if !h.live && h.pf.events > 0 {
		now = h.pf.last
	}
	start := h.pf.start()
	ts := st.Run.TimeScale
	if ts <= 0 {
		ts = 1
	}
	sec := func(t time.Time) float64 { return t.Sub(start).Seconds() / ts }
	if v.Res != nil {
		p.ElapsedS, p.CostUSD = v.Res.Realized.JCT, v.Res.Realized.Cost
		rep := runstate.Compare(st.Plan, v.Res)
		for _, sr := range rep.Stages {
			r := sr.Realized
			row := stageRow{Bracket: sr.Bracket, Stage: sr.Stage + 1, Trials: r.Trials, Iters: r.Iters, GPUs: r.GPUs, Nodes: r.Nodes,
				Done: r.Done, Failed: r.Failed, Retries: r.Retries, Timeouts: r.Timeouts, Interrup: r.Interrupted,
				PredTime: sr.Predicted.Duration, Time: r.Duration, PredCost: sr.Predicted.Cost, Cost: r.Cost, State: "pending"}
			switch {
			case r.Promoted != nil || (r.Done+r.Failed >= r.Trials && r.Duration > 0 && !h.live):
				row.State = "done"
			case r.Duration > 0:
				row.State = "running"
			}
			p.Stages = append(p.Stages, row)
			p.Done += r.Done
			p.Failed += r.Failed
			p.Total += r.Trials
		}
		if st.ASHA != nil {
			p.ASHA, p.Stages, p.Done, p.Failed, p.Total = true, nil, 0, 0, 0
			p.Rungs, p.Phases = rundir.ASHARungs(v.Res), v.Res.Phases
			for _, r := range p.Rungs {
				p.Done += r.Results
				p.Failed += r.Failed
			}
			p.RungsReached, p.RungsTotal = v.Stages()
		}
		for _, r := range v.Res.Revisions {
			row := revisionRow{At: r.At, Bracket: r.Bracket, From: fmt.Sprintf("stage %d", r.Stage+1), Reason: r.Reason,
				Before: fmt.Sprint(r.GPUsBefore), After: r.NewPlan(),
				Said: fmt.Sprintf("JCT %s → %s, P(miss) %.0f%% → %.0f%%, cost %s → %s", clock(r.Before.JCT), clock(r.After.JCT),
					100*r.Before.MissProb, 100*r.After.MissProb, money(r.Before.Cost), money(r.After.Cost))}
			if r.Phase {
				row.Bracket, row.From = "asha", fmt.Sprintf("phase %d", r.Stage+1)
			}
			if r.DeadlineGivesWay {
				row.Said += "; the deadline gives way to the budget"
			}
			p.Revisions = append(p.Revisions, row)
		}
		if f := v.Res.Forecast; f != nil && !v.Res.Finished {
			p.Forecast = fmt.Sprintf("forecast: JCT %s (P(miss) %.0f%%), cost %s", clock(f.JCT), 100*f.MissProb, money(f.Cost))
			if b := st.Exp.Budget.MaxCostUSD; b > 0 && f.Cost > b {
				p.Forecast += " — OVER the budget " + money(b)
			}
			p.DeadlineWarning = runstate.DeadlineWarning(f, st.Exp.Deadline.D().Seconds(), st.Exp.Planner.DeadlineQuantile)
		}
	}
	p.setTrials(v.Res, brackets, 0, TrialPage)
	h.res = v.Res
	// The schedules side by side on one time axis.
	realized, running, names := realizedSchedule(v.Snap, now, ts, st.Exp.Cluster.GPUsPerNode)
	realized.Rungs = st.ASHA != nil
	var marks []mark
	if v.Res != nil {
		for _, in := range v.Res.Interruptions {
			marks = append(marks, mark{At: in.At, Class: "interrupt", Title: fmt.Sprintf("interrupted at %s: %s, nodes %s", clock(in.At), in.Bracket, strings.Join(in.Nodes, ","))})
		}
		for _, r := range v.Res.Revisions {
			marks = append(marks, mark{At: r.At, Class: "replan", Title: fmt.Sprintf("re-plan at %s: %s from stage %d", clock(r.At), r.Bracket, r.Stage+1)})
		}
		slices.SortStableFunc(marks, func(a, b mark) int { return cmp.Compare(a.At, b.At) })
	}
	xmax := math.Max(p.ElapsedS, p.PredJCT)
	planned := sim.Schedule{}
	if h.planned != nil {
		planned = *h.planned
	}
	for _, sp := range append(planned.Spans, realized.Spans...) {
		xmax = math.Max(xmax, sp.End)
	}
	// The deadline is drawn when it is near the schedule; a far one would squash it.
	var deadlines []mark
	if p.DeadlineS <= 1.5*xmax {
		deadlines = []mark{{At: p.DeadlineS, Class: "deadline", Title: "deadline " + clock(p.DeadlineS)}}
		xmax = math.Max(xmax, p.DeadlineS)
	}
	xmax *= 1.03
	p.Planned = gantt("gantt-planned", "planned (one sampled run of the plan)", planned, xmax,
		func(sp sim.Span) (int, string) {
			return sp.Bracket*1000 + sp.Trial, fmt.Sprintf("planned trial %d of bracket %d", sp.Trial, sp.Bracket)
		}, nil, deadlines)
	p.Realized = gantt("gantt-realized", "realized", realized, xmax,
		func(sp sim.Span) (int, string) {
			if sp.Trial < len(names) {
				return sp.Trial, names[sp.Trial]
			}
			return sp.Trial, "trial"
		}, func(sp sim.Span) bool { return running[spanKey(sp)] }, append(marks, deadlines...))
	p.Cost = costChart(st, h.pf.realized(h.fold, now), p, sec, deadlines)
	if !p.ASHA { // an ASHA run has no stage ends; its phases' times are in the progress section
		p.Time = timeChart(st, v.Res, deadlines)
	}
	var curves []series
	all := h.pf.curves.Unmarked()
	shown := bestCurves(all, st.Exp.Objective.Mode == "max", maxCurves)
	for _, cv := range shown {
		cv = h.pf.curves.Marked(cv)
		curves = append(curves, series{X: cv.X, Y: cv.Y, Marks: cv.Marks, Colour: trialColour(trialIndex(names, cv.Trial)), Title: cv.Trial, Thin: true})
	}
	p.Search = buildSearch(v, h.pf.search.Summary(v, h.pf.curves), p.Metric)
	p.Pareto = buildPareto(st.Exp, v.Res)
	if p.Pareto != nil { // the front's curves, drawn over the others, each a link's target
		for i := range p.Pareto.Front {
			row := &p.Pareto.Front[i]
			cv, ok := h.pf.curves.Curve(row.Trial)
			if !ok {
				continue
			}
			row.Curve = curveAnchor(row.Trial)
			sr := series{X: cv.X, Y: cv.Y, Colour: frontColour, Title: cv.Trial + " (Pareto front)", Anchor: row.Curve}
			if i == 0 {
				sr.Name = "Pareto front"
			}
			curves = append(curves, sr)
		}
	}
	if cv, ok := h.pf.curves.Curve(p.Search.BestTrial); ok { // drawn again on top, thick: the winner
		curves = append(curves, series{Name: "best: " + cv.Trial, X: cv.X, Y: cv.Y, Colour: "#d62728", Title: cv.Trial + " (best)"})
	}
	title := "learning curves (" + p.Metric + " by iteration; dots: promoted)"
	if len(shown) < len(all) {
		title = fmt.Sprintf("learning curves of the best %d of %d trials (%s by iteration; dots: promoted)", len(shown), len(all), p.Metric)
	}
	p.Curves = lineChart("curves", title, curves, nil, nil,
		func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }, func(y float64) string { return strconv.FormatFloat(y, 'g', 3, 64) })
	if data, err := os.ReadFile(filepath.Join(st.Dir, rundir.SpecCopy)); err == nil {
		p.Spec = string(data) // as in the spec file: trainer.env values are shown as written there, nothing from the environment
	}
	var buf bytes.Buffer
	st.Plan.WriteTable(&buf)
	p.Plan = buf.String()
	p.CanCancel = h.s.cfg.AllowCancel && (h.live || p.Status == "interrupted")
	if p.CanCancel {
		p.CSRF = h.s.csrf("cancel", h.name)
	}
	return p
}

// curveAnchor is the id of a trial's learning curve on its run's page.
func curveAnchor(trial string) string { return "curve-" + trial }

func trialIndex(names []string, id string) int {
	for i, n := range names {
		if n == id {
			return i
		}
	}
	return len(names)
}

func spanKey(sp sim.Span) [3]float64 { return [3]float64{float64(sp.Row), sp.Start, float64(sp.Trial)} }

// realizedSchedule is the run's schedule (runstate.RealizedSchedule of its snapshot), every
// launch still running drawn up to now. It returns which spans are running and the trials' IDs
// by the schedule's trial numbers.
func realizedSchedule(snap *runstate.Snapshot, now time.Time, timeScale float64, gpn int) (sim.Schedule, map[[3]float64]bool, []string) {
	if snap == nil {
		return sim.Schedule{}, nil, nil
	}
	var names []string
	seen := map[string]bool{}
	for _, l := range snap.Launches {
		if !seen[l.Trial] {
			seen[l.Trial] = true
			names = append(names, l.Trial)
		}
	}
	sc := runstate.RealizedSchedule(snap, now, timeScale, gpn)
	running := map[[3]float64]bool{}
	open := map[string]bool{}
	for _, l := range snap.Open() {
		open[l.Trial] = true
	}
	end := now.Sub(snap.Start).Seconds() / timeScale
	for _, sp := range sc.Spans {
		if !sp.Provision && sp.End == end && sp.Trial < len(names) && open[names[sp.Trial]] {
			running[spanKey(sp)] = true
		}
	}
	return sc, running, names
}

// costChart is cost over time: the plan's predicted cumulative cost (each stage's predicted cost
// accrued over its predicted span) with its p5-p95 band, and the realized cost (the journal
// replayed up to moments of the run), with the budget and the deadline.
func costChart(st *rundir.State, moments []costPoint, p *runPage, sec func(time.Time) float64, deadlines []mark) chart {
	plan := st.Plan
	end := plan.Predicted.JCT.Mean
	var pred series
	pred.Name, pred.Colour = "predicted (mean, p5-p95)", palette.Predicted
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 1
		}
		return a / b
	}
	lo, hi := ratio(plan.Predicted.Cost.P5, plan.Predicted.Cost.Mean), ratio(plan.Predicted.Cost.P95, plan.Predicted.Cost.Mean)
	const n = 40
	for i := 0; i <= n; i++ {
		t := end * float64(i) / n
		c := 0.0
		for _, b := range plan.Brackets {
			for _, s := range b.Stages {
				if s.Duration > 0 {
					c += s.Cost * math.Min(1, math.Max(0, (t-s.Start)/s.Duration))
				} else if t >= s.Start {
					c += s.Cost
				}
			}
		}
		pred.X, pred.Y = append(pred.X, t), append(pred.Y, c)
		pred.Lo, pred.Hi = append(pred.Lo, c*lo), append(pred.Hi, c*hi)
	}
	real := series{Name: "realized", Colour: palette.Realized}
	for _, m := range moments {
		if m.ok {
			real.X, real.Y = append(real.X, sec(m.at)), append(real.Y, m.cost)
		}
	}
	if len(real.X) > 0 { // the last point is the run's figure itself
		real.X[len(real.X)-1], real.Y[len(real.Y)-1] = p.ElapsedS, p.CostUSD
	}
	var hm []mark
	if p.BudgetUSD > 0 && p.BudgetUSD <= 2*math.Max(p.PredCostP95, p.CostUSD) {
		hm = append(hm, mark{At: p.BudgetUSD, Class: "budget", Title: "budget " + money(p.BudgetUSD)})
	}
	return lineChart("cost", "cost over time", []series{pred, real}, deadlines, hm, clock, dollars)
}

// timeChart is time by stage: when each stage was predicted to end (the mean, with a band from
// the plan's p5 and p95 JCT) and when it did.
func timeChart(st *rundir.State, res *runstate.Result, deadlines []mark) chart {
	plan := st.Plan
	mean := plan.Predicted.JCT.Mean
	lo, hi := 1.0, 1.0
	if mean > 0 {
		lo, hi = plan.Predicted.JCT.P5/mean, plan.Predicted.JCT.P95/mean
	}
	pred := series{Name: "predicted stage end (mean, p5-p95)", Colour: palette.Predicted}
	real := series{Name: "realized stage end", Colour: palette.Realized}
	k := 0
	for b, br := range plan.Brackets {
		for s, ps := range br.Stages {
			k++
			e := ps.Start + ps.Duration
			pred.X, pred.Y = append(pred.X, float64(k)), append(pred.Y, e)
			pred.Lo, pred.Hi = append(pred.Lo, e*lo), append(pred.Hi, e*hi)
			y := math.NaN()
			if res != nil && b < len(res.Brackets) && s < len(res.Brackets[b].Stages) {
				if r := res.Brackets[b].Stages[s]; r.Promoted != nil || r.Duration > 0 {
					y = r.Start + r.Duration
				}
			}
			real.X, real.Y = append(real.X, float64(k)), append(real.Y, y)
		}
	}
	for i := range real.Y {
		if !math.IsNaN(real.Y[i]) {
			real.Marks = append(real.Marks, i)
		}
	}
	return lineChart("time", "time by stage (end of each stage, in order)", []series{pred, real}, nil, deadlines,
		func(x float64) string {
			if x != math.Trunc(x) || x < 1 {
				return ""
			}
			return "stage " + strconv.Itoa(int(x))
		}, clock)
}

func paramsText(p map[string]any) string {
	if p == nil {
		return "(drawn at its first launch)"
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, p[k])
	}
	return strings.Join(parts, " ")
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	h, err := s.hub(r.PathValue("run"))
	if err != nil {
		s.fail(w, statusOf(err), err.Error())
		return
	}
	page := h.current()
	offset, limit, err := trialPage(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if offset != 0 || limit != TrialPage { // another page of the trial table than the stream's
		h.mu.Lock()
		other := *page
		other.setTrials(h.res, h.st.Exp.Algorithm.Brackets(), offset, limit)
		other.OtherPage = true
		h.mu.Unlock()
		page = &other
	}
	s.render(w, http.StatusOK, "run.html", page)
}

// trialPage reads a page of the trial table from a request: ?offset= (default 0) and ?limit=
// (default TrialPage, at most MaxTrialPage).
func trialPage(r *http.Request) (offset, limit int, err error) {
	q := r.URL.Query()
	return rundir.ParsePage(q.Get("offset"), q.Get("limit"), TrialPage, MaxTrialPage)
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	h, err := s.hub(r.PathValue("run"))
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	s.stream(w, r, &h.feed, s.cfg.Poll, h.pollRefresh)
}

func statusOf(err error) int {
	if errors.Is(err, rundir.ErrNotRun) || errors.Is(err, rundir.ErrNoTrial) {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// trialLog shows the tail of a trial's log as text: at most MaxLogLines lines and MaxLogBytes.
func (s *Server) trialLog(w http.ResponseWriter, r *http.Request) {
	h, err := s.hub(r.PathValue("run"))
	if err != nil {
		s.fail(w, statusOf(err), err.Error())
		return
	}
	h.refresh()
	h.mu.Lock()
	path, err := rundir.TrialLogIn(h.st.Dir, h.pf.trials, r.PathValue("trial"))
	h.mu.Unlock()
	if err != nil {
		s.fail(w, statusOf(err), err.Error())
		return
	}
	n := 200
	if q, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil && q > 0 {
		n = min(q, MaxLogLines)
	}
	data := map[string]any{"Run": h.name, "Trial": r.PathValue("trial"), "Lines": n}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		data["Text"] = "(no output yet)"
	case err != nil:
		s.fail(w, http.StatusInternalServerError, err.Error())
		return
	default:
		defer f.Close()
		if err := rundir.SeekTail(f, n); err != nil {
			s.fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		info, _ := f.Stat()
		pos, _ := f.Seek(0, io.SeekCurrent)
		if info != nil && info.Size()-pos > MaxLogBytes { // long lines: the last bytes only
			f.Seek(info.Size()-MaxLogBytes, io.SeekStart)
			data["Cut"] = true
		}
		b, _ := io.ReadAll(io.LimitReader(f, MaxLogBytes))
		data["Text"] = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	s.render(w, http.StatusOK, "log.html", data)
}

// cancel cancels a run as `rubberband cancel` does, behind --allow-cancel, a form token and a
// same-origin check.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.AllowCancel {
		s.fail(w, http.StatusForbidden, "this dashboard is read-only: start it with --allow-cancel to cancel runs from it")
		return
	}
	name := r.PathValue("run")
	dir, ok := s.runDir(name)
	if !ok {
		s.fail(w, http.StatusNotFound, "no such run")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil || !sameOrigin(r) || !hmacEqual(r.PostForm.Get("csrf"), s.csrf("cancel", name)) {
		s.fail(w, http.StatusForbidden, "refused: the request did not come from this dashboard's own form")
		return
	}
	if err := s.cancelRun(r.Context(), dir); err != nil {
		s.fail(w, http.StatusInternalServerError, "cancel: "+err.Error())
		return
	}
	http.Redirect(w, r, "/runs/"+name, http.StatusSeeOther)
}

func hmacEqual(a, b string) bool { return a != "" && len(a) == len(b) && subtleEq(a, b) }
