package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/palette"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Bounds on what the plan page computes for a browser, beside MaxPageSamples.
const (
	curveSamples = 100 // per point of the cost-vs-deadline curves
	curvePoints  = 7
)

// specChoice is a spec under the root: a YAML file in it, or a run's copy of its spec.
type specChoice struct {
	ID, Label string
}

func (s *Server) specChoices() []specChoice {
	var out []specChoice
	entries, _ := os.ReadDir(s.cfg.Root)
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			out = append(out, specChoice{ID: n, Label: n})
		}
	}
	for _, dir := range rundir.Dirs(s.cfg.Root) {
		n := filepath.Base(dir)
		out = append(out, specChoice{ID: "run:" + n, Label: "the spec of run " + n})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// loadChoice loads a spec the page offered, and nothing else under or beyond the root.
func (s *Server) loadChoice(id string) (*spec.Experiment, []byte, error) {
	for _, c := range s.specChoices() {
		if c.ID != id {
			continue
		}
		if name, ok := strings.CutPrefix(id, "run:"); ok {
			st, err := rundir.Open(filepath.Join(s.cfg.Root, name))
			if err != nil {
				return nil, nil, err
			}
			_, data, err := rundir.LoadSpecCopy(st.Dir, st.Run)
			return st.Exp, data, err
		}
		// One read: the text shown is the text planned, however the file changes meanwhile.
		exp, src, err := spec.LoadSource(filepath.Join(s.cfg.Root, id))
		if src == nil {
			return nil, nil, err
		}
		return exp, src.Data, err
	}
	return nil, nil, fmt.Errorf("no spec %q under %s", id, s.cfg.Root)
}

// errNoFiles refuses every file a pasted spec names: the browser may not read the server's disk.
var errNoFiles = errors.New("a pasted spec may not name files on the server (give profile inline, not profile.file)")

type planPage struct {
	Choices  []specChoice
	Chosen   string
	Pasted   string
	Note     string
	Error    string
	Name     string
	Table    string
	Curve    *chart
	Points   []curvePoint
	Planners []string
	Samples  int
	CSRF     string
}

type curvePoint struct {
	Deadline string
	Cells    []string
}

func (s *Server) planPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := &planPage{Choices: s.specChoices(), Chosen: q.Get("spec"), CSRF: s.csrf("plan", "")}
	if page.Chosen == "" {
		s.render(w, http.StatusOK, "plan.html", page)
		return
	}
	// Planning takes every core for a while: a page of another site may not start it (this GET
	// is not safe), and a link that may come from one only shows the form, the spec chosen.
	if !sameOrigin(r) {
		s.fail(w, http.StatusForbidden, "refused: planning starts from this dashboard's own plan page only")
		return
	}
	if !s.planAsked(r, q.Get("csrf")) {
		page.Note = "Press plan to plan this spec."
		s.render(w, http.StatusOK, "plan.html", page)
		return
	}
	exp, _, err := s.loadChoice(page.Chosen)
	s.plan(w, r, page, exp, err)
}

// planAsked says whether a GET that names a spec was asked for on this dashboard: the browser
// says it comes from this origin or was typed (Sec-Fetch-Site), or it carries the plan form's
// token (a browser that sends no Sec-Fetch-Site).
func (s *Server) planAsked(r *http.Request, token string) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "same-origin" || site == "none" || hmacEqual(token, s.csrf("plan", ""))
}

func (s *Server) planPasted(w http.ResponseWriter, r *http.Request) {
	page := &planPage{Choices: s.specChoices(), CSRF: s.csrf("plan", "")}
	r.Body = http.MaxBytesReader(w, r.Body, MaxPastedSpec+4<<10)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a pasted spec may have at most %d bytes", MaxPastedSpec))
			return
		}
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if !sameOrigin(r) || !hmacEqual(r.PostForm.Get("csrf"), s.csrf("plan", "")) {
		s.fail(w, http.StatusForbidden, "refused: the request did not come from this dashboard's own form")
		return
	}
	text := r.PostForm.Get("spec")
	if len(text) > MaxPastedSpec {
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a pasted spec may have at most %d bytes", MaxPastedSpec))
		return
	}
	page.Pasted = text
	exp, err := spec.Parse("pasted.yaml", []byte(text), func(string) ([]byte, error) { return nil, errNoFiles })
	s.plan(w, r, page, exp, err)
}

// plan plans exp as `rubberband plan` does (planner.Plan) and sweeps the deadline with every
// planner, within the page's bounds whatever the spec's source: MaxPageSamples samples and
// Config.PlanTimeout. It stops at the next point when the browser goes away.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, page *planPage, exp *spec.Experiment, err error) {
	if err != nil {
		page.Error = err.Error()
		s.render(w, http.StatusBadRequest, "plan.html", page)
		return
	}
	select {
	case s.plans <- struct{}{}:
		defer func() { <-s.plans }()
	default:
		page.Error = "another plan is being computed: try again in a moment"
		s.render(w, http.StatusServiceUnavailable, "plan.html", page)
		return
	}
	if exp.Planner.Samples > MaxPageSamples {
		page.Note = fmt.Sprintf("Planned with %d samples, not the spec's %d: the dashboard's bound (`rubberband plan` takes them all).",
			MaxPageSamples, exp.Planner.Samples)
		e := *exp
		e.Planner.Samples = MaxPageSamples
		exp = &e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PlanTimeout)
	defer cancel()
	page.Name = exp.Name
	rep, err := s.planSpec(ctx, exp)
	if err != nil {
		page.Error = err.Error()
	}
	if rep != nil {
		var buf bytes.Buffer
		rep.WriteTable(&buf)
		page.Table = buf.String()
	}
	var c *chart
	var points []curvePoint
	if ctx.Err() == nil {
		c, points, err = deadlineCurves(ctx, exp)
	}
	if r.Context().Err() != nil {
		return // the browser went away
	}
	if ctx.Err() != nil {
		page.Error = fmt.Sprintf("planning was stopped after %v, the dashboard's bound: `rubberband plan` takes the time it needs", s.cfg.PlanTimeout)
		s.render(w, http.StatusServiceUnavailable, "plan.html", page)
		return
	}
	if err != nil && page.Error == "" {
		page.Error = err.Error()
	}
	names, _ := curveOutcomes(exp)
	page.Curve, page.Points, page.Planners, page.Samples = c, points, names, min(exp.Planner.Samples, curveSamples)
	s.render(w, http.StatusOK, "plan.html", page)
}

// planSpec plans exp as `rubberband plan` does.
func planSpec(ctx context.Context, exp *spec.Experiment) (*planner.Report, error) {
	if exp.Algorithm.ASHA != nil { // as `rubberband plan` plans it: its GPU schedule, not SHA's stages
		m, err := sim.NewModel(exp)
		if err != nil {
			return nil, err
		}
		res, err := planner.PlanASHA(ctx, exp, m)
		if err != nil {
			return nil, err
		}
		return res.Report(exp), nil
	}
	rep, _, err := planner.PlanSpec(ctx, exp)
	return rep, err
}

// curveOutcomes are the columns of the deadline sweep and how a point is planned: every planner
// of stages, or an ASHA job's elastic schedule, fixed slots and synchronous SHA.
func curveOutcomes(exp *spec.Experiment) ([]string, func(context.Context, *spec.Experiment) (map[string]planner.Outcome, error)) {
	if exp.Algorithm.ASHA != nil {
		return planner.ASHAOutcomes(), planner.CompareASHA
	}
	names := spec.PlannerNames()
	return names, func(ctx context.Context, e *spec.Experiment) (map[string]planner.Outcome, error) {
		return planner.Compare(ctx, e, names)
	}
}

// deadlineCurves predicts every planner's cost at deadlines from half to twice the spec's, one
// point at a time so that a gone browser stops it (planner.Compare, as whatif does per point).
func deadlineCurves(ctx context.Context, exp *spec.Experiment) (*chart, []curvePoint, error) {
	names, compare := curveOutcomes(exp)
	d0 := exp.Deadline.Seconds()
	if d0 <= 0 {
		return nil, nil, fmt.Errorf("the spec has no deadline")
	}
	ss := make([]series, len(names))
	for i, n := range names {
		ss[i] = series{Name: n, Colour: palette.Series[i%len(palette.Series)]}
	}
	var points []curvePoint
	for i := range curvePoints {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		d := d0 * (0.5 + 1.5*float64(i)/float64(curvePoints-1))
		e := *exp
		e.Deadline = spec.Duration(time.Duration(d * float64(time.Second)))
		e.Planner.Samples = min(e.Planner.Samples, curveSamples)
		out, err := compare(ctx, &e)
		if err != nil {
			return nil, nil, fmt.Errorf("at deadline %s: %w", clock(d), err)
		}
		pt := curvePoint{Deadline: clock(d)}
		for k, n := range names {
			o, ok := out[n]
			switch {
			case !ok:
				pt.Cells = append(pt.Cells, "no plan")
			case !o.Feasible:
				pt.Cells = append(pt.Cells, "misses ("+clock(o.Predicted.JCT.P50)+")")
			default:
				pt.Cells = append(pt.Cells, money(o.Predicted.Cost.Mean)+" in "+clock(o.Predicted.JCT.Mean))
				ss[k].X = append(ss[k].X, d)
				ss[k].Y = append(ss[k].Y, o.Predicted.Cost.Mean)
				ss[k].Lo = append(ss[k].Lo, o.Predicted.Cost.P5)
				ss[k].Hi = append(ss[k].Hi, o.Predicted.Cost.P95)
			}
		}
		points = append(points, pt)
	}
	for k := range ss {
		ss[k].Name += " (mean, p5-p95)"
	}
	c := lineChart("deadline-curve", "predicted cost against the deadline, every planner", ss,
		[]mark{{At: d0, Class: "deadline", Title: "the spec's deadline"}}, nil, clock, dollars)
	return &c, points, nil
}

// funcs are the templates' helpers.
var funcs = map[string]any{
	"clock": clock,
	"money": money,
	"pct": func(a, b float64) string {
		if b <= 0 {
			return "-"
		}
		return strconv.FormatFloat(100*a/b, 'f', 0, 64) + "%"
	},
	"num": func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) },
	"g4":  func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) },
	"deref": func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"f1":     func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) },
	"inc":    func(i int) int { return i + 1 }, // a 0-based index, as people number
	"barpct": func(a, b int) int { return int(100 * float64(a) / float64(max(b, 1))) },
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
}
