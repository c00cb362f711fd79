package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// maxBody bounds a request's body: a submission with its files, JSON-quoted.
const maxBody = 2*MaxSpecBytes + 64<<10

// Handler is the server's HTTP handler: the API under /api/v1.
func (s *Server) Handler() http.Handler { return s.mux }

// routes are the API's endpoints: what docs/openapi.yaml documents (a test holds the two to one
// list).
func (s *Server) routes() []route {
	return []route{
		{"GET /api/v1/health", s.health},
		{"GET /api/v1/whoami", s.authed(s.whoami)},
		{"POST /api/v1/runs", s.authed(s.submit)},
		{"GET /api/v1/runs", s.authed(s.listRuns)},
		{"GET /api/v1/runs/{id}", s.authed(s.getRun)},
		{"POST /api/v1/runs/{id}/cancel", s.authed(s.cancelRun)},
		{"POST /api/v1/runs/{id}/resume", s.authed(s.resumeRun)},
		{"GET /api/v1/runs/{id}/status", s.authed(s.runStatus)},
		{"GET /api/v1/runs/{id}/report", s.authed(s.runReport)},
		{"GET /api/v1/runs/{id}/trials", s.authed(s.runTrials)},
		{"GET /api/v1/runs/{id}/best", s.authed(s.runBest)},
		{"GET /api/v1/runs/{id}/events", s.authed(s.runEvents)},
		{"GET /api/v1/runs/{id}/logs", s.authed(s.runLogs)},
		{"GET /api/v1/teams", s.admin(s.listTeams)},
		{"POST /api/v1/teams", s.admin(s.createTeam)},
		{"PUT /api/v1/teams/{name}", s.admin(s.updateTeam)},
		{"GET /api/v1/users", s.admin(s.listUsers)},
		{"POST /api/v1/users", s.admin(s.createUser)},
		{"DELETE /api/v1/users/{name}", s.admin(s.deleteUser)},
		{"GET /api/v1/audit", s.authed(s.audit)},
		{"HEAD /api/v1/code/{id}", s.authed(s.headCode)},
		{"PUT /api/v1/code/{id}", s.authed(s.putCode)},
	}
}

// route is one endpoint: its method and path pattern, and its handler.
type route struct {
	pattern string
	handle  http.HandlerFunc
}

type handler func(w http.ResponseWriter, r *http.Request, u store.User)

// authed authenticates every request (401 without a known token).
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := Authenticate(r.Context(), s.cfg.Store, r)
		if err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="rubberband"`)
				writeError(w, http.StatusUnauthorized, err)
				return
			}
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		if !bearer(r) && !s.cookieWriteOK(r) {
			writeError(w, http.StatusForbidden, errCrossOrigin)
			return
		}
		h(w, r, u)
	}
}

// admin is authed for admins only (403 for the others).
func (s *Server) admin(h handler) http.HandlerFunc {
	return s.authed(func(w http.ResponseWriter, r *http.Request, u store.User) {
		if !u.Admin {
			writeError(w, http.StatusForbidden, fmt.Errorf("forbidden: %s is not an admin", u.Name))
			return
		}
		h(w, r, u)
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	holding := s.holding
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "holder": s.cfg.Holder, "driving": holding})
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, u store.User) {
	writeJSON(w, http.StatusOK, u)
}

// runJSON is a run as the API shows it: with its predicted start while it waits.
type runJSON struct {
	store.Run
	PredictedStart time.Time `json:"predicted_start,omitzero"`
}

func (s *Server) withStart(r store.Run) runJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	return runJSON{Run: r, PredictedStart: s.starts[r.ID]}
}

// submitted is what a submission returns: the run (queued) and its plan.
type submitted struct {
	Run  runJSON         `json:"run"`
	Plan *planner.Report `json:"plan"`
}

// refused is what a refused submission returns: why, with the figures, and the plan.
type refused struct {
	Error   string          `json:"error"`
	Refusal *Refusal        `json:"refusal"`
	Plan    *planner.Report `json:"plan,omitempty"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request, u store.User) {
	var sub Submission
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&sub); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read the submission: %w", err))
		return
	}
	run, rep, err := s.Submit(r.Context(), u, sub)
	var ref *Refusal
	var in *InputError
	switch {
	case errors.As(err, &ref):
		s.record(r.Context(), u, "refuse", "", err.Error())
		code := http.StatusForbidden
		if ref.Reason == "queue" {
			code = http.StatusTooManyRequests // it may be submitted again once the queue moves
		}
		writeJSON(w, code, refused{Error: boundText(err.Error(), MaxErrorBytes), Refusal: ref, Plan: rep})
	case errors.As(err, &in):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": boundText(err.Error(), MaxErrorBytes), "problems": in.Problems, "missing_files": in.Missing})
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		s.record(r.Context(), u, "submit", run.ID, fmt.Sprintf("%s: predicted %s, %d GPUs", run.Name, format.Money(run.PredictedCostUSD), run.GPUs))
		writeJSON(w, http.StatusCreated, submitted{Run: s.withStart(run), Plan: rep})
	}
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, u store.User) {
	f := store.RunFilter{Team: u.Team}
	if u.Admin {
		f.Team = r.URL.Query().Get("team")
	}
	for _, st := range r.URL.Query()["state"] {
		f.States = append(f.States, store.RunState(st))
	}
	runs, err := s.cfg.Store.Runs(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	out := make([]runJSON, len(runs))
	for i, run := range runs {
		out[i] = s.withStart(run)
	}
	writeJSON(w, http.StatusOK, out)
}

// run is the run the path names (its ID, or its name or ID's start among u's runs: Lookup),
// when u may see it (404 otherwise: another team's run is not said to exist).
func (s *Server) run(w http.ResponseWriter, r *http.Request, u store.User) (store.Run, bool) {
	run, err := s.lookup(w, r, u)
	if err == nil && !mayAccess(u, run.Team) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no run %q", r.PathValue("id")))
		return run, false
	}
	return run, err == nil
}

// lookup is Lookup of the path's run; its errors are answered (404 for none, 409 for a name
// several runs have).
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, u store.User) (store.Run, error) {
	run, err := Lookup(r.Context(), s.cfg.Store, u, r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, errAmbiguous):
		writeError(w, http.StatusConflict, err)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	}
	return run, err
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, u store.User) {
	if run, ok := s.run(w, r, u); ok {
		writeJSON(w, http.StatusOK, s.withStart(run))
	}
}

// cancelRun cancels a queued run at once and asks the driving server to cancel a running one.
// Another team's run is refused (403) rather than hidden: the caller named it.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, u store.User) {
	run, err := s.lookup(w, r, u)
	if err != nil {
		return
	}
	if !mayAccess(u, run.Team) {
		// Both teams see it: the caller's, and the one whose run it named.
		s.record(r.Context(), u, "cancel-refused", run.ID, "run of team "+run.Team)
		s.recordFor(r.Context(), u.Name, run.Team, "cancel-refused", run.ID, "by "+u.Name+" of team "+u.Team)
		writeError(w, http.StatusForbidden, fmt.Errorf("forbidden: run %s is team %s's; %s is in team %s", run.ID, run.Team, u.Name, u.Team))
		return
	}
	now := s.cfg.Now()
	run, err = s.cfg.Store.UpdateRun(r.Context(), run.ID, func(x *store.Run) error {
		switch {
		case x.State.Ended():
		case x.State == store.Queued || x.State == store.Paused: // no driver to stop
			x.State, x.EndedAt, x.Message = store.Cancelled, now, "cancelled by "+u.Name+" while "+string(x.State)
		default:
			x.CancelRequested, x.Message = true, "cancelled by "+u.Name
		}
		return nil
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	s.record(r.Context(), u, "cancel", run.ID, string(run.State))
	s.poke()
	writeJSON(w, http.StatusAccepted, s.withStart(run))
}

// view reads the state directory of the run the path names, when u may see it (409 while its
// driver has not made it).
func (s *Server) view(w http.ResponseWriter, r *http.Request, u store.User) (*rundir.View, bool) {
	run, ok := s.run(w, r, u)
	if !ok {
		return nil, false
	}
	f, err := s.follower(s.dirOf(r.Context(), run))
	if err == nil {
		var v *rundir.View
		if v, err = f.View(); err == nil {
			return v, true
		}
	}
	writeError(w, http.StatusConflict, fmt.Errorf("run %s: %w", run.ID, err))
	return nil, false
}

// maxFollowed is how many runs' folds the server keeps between requests.
const maxFollowed = 8

// follower is the run in dir followed (rundir.Follower), kept for the next request; one made
// anew when its folder changed what it loaded.
func (s *Server) follower(dir string) (*rundir.Follower, error) {
	s.mu.Lock()
	f := s.followed[dir]
	s.mu.Unlock()
	if f != nil && !f.Stale() {
		return f, nil
	}
	f, err := rundir.FollowRun(dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.followed) >= maxFollowed {
		for d := range s.followed { // any one: a run asked for again is followed anew
			delete(s.followed, d)
			break
		}
	}
	s.followed[dir] = f
	return f, nil
}

// runStatus answers what `rubberband status` prints of the run, rendered as it is on the
// run's own machine (rundir.RenderStatus): ?output=json its JSON (on one line with ?watch),
// else its tables (with ?trials, a row per trial).
func (s *Server) runStatus(w http.ResponseWriter, r *http.Request, u store.User) {
	v, ok := s.view(w, r, u)
	if !ok {
		return
	}
	q := r.URL.Query()
	o := rundir.StatusOptions{JSON: q.Get("output") == "json", Compact: q.Has("watch"), Trials: q.Has("trials")}
	out, err := rundir.RenderStatus(s.shown(v), o)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeRendered(w, o.JSON, out)
}

// runReport answers what `rubberband report` prints: realized against predicted and what the
// search found, as JSON (rundir.ReportJSON), or with ?output=table as its tables.
func (s *Server) runReport(w http.ResponseWriter, r *http.Request, u store.User) {
	v, ok := s.view(w, r, u)
	if !ok {
		return
	}
	if v.Res == nil {
		writeError(w, http.StatusConflict, fmt.Errorf("run %s has not started", v.State.Run.RunID))
		return
	}
	rep, err := rundir.Replay(v.State)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	rep.State = s.shown(v).State
	asJSON := r.URL.Query().Get("output") != "table"
	var buf bytes.Buffer
	if err := rep.WriteReport(&buf, asJSON); err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeRendered(w, asJSON, buf.Bytes())
}

// shown is v with its state directory named as a user sees it: the run's folder under the
// server's root (the root's own path is the server's business).
func (s *Server) shown(v *rundir.View) *rundir.View {
	st := *v.State
	if rel, err := filepath.Rel(s.cfg.Root, st.Dir); err == nil {
		st.Dir = "server:" + filepath.ToSlash(rel)
	}
	shown := *v
	shown.State = &st
	return &shown
}

// writeRendered answers what a command prints: JSON, or text.
func writeRendered(w http.ResponseWriter, asJSON bool, out []byte) {
	w.Header().Set("Content-Type", map[bool]string{true: "application/json", false: "text/plain; charset=utf-8"}[asJSON])
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// TrialsPage is how many trials /trials answers at once unless ?limit= says; MaxTrialsPage is
// the most it answers.
const (
	TrialsPage    = 1000
	MaxTrialsPage = 10000
)

// runTrials answers a page of the run's trials (?offset=, ?limit=: TrialsPage from the first),
// a JSON array; X-Total-Count says how many there are, and a Link header (rel="next") where
// the next page is, while there is one.
func (s *Server) runTrials(w http.ResponseWriter, r *http.Request, u store.User) {
	q := r.URL.Query()
	offset, limit, err := rundir.ParsePage(q.Get("offset"), q.Get("limit"), TrialsPage, MaxTrialsPage)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	v, ok := s.view(w, r, u)
	if !ok {
		return
	}
	trials := []runstate.TrialResult{}
	if v.Res != nil {
		trials = v.Res.Trials
	}
	from, to := rundir.PageBounds(len(trials), offset, limit)
	w.Header().Set("X-Total-Count", strconv.Itoa(len(trials)))
	if to < len(trials) {
		w.Header().Set("Link", fmt.Sprintf(`<%s?offset=%d&limit=%d>; rel="next"`, r.URL.Path, to, limit))
	}
	writeJSON(w, http.StatusOK, trials[from:to])
}

func (s *Server) runBest(w http.ResponseWriter, r *http.Request, u store.User) {
	v, ok := s.view(w, r, u)
	if !ok {
		return
	}
	b, err := rundir.Best(v)
	if errors.Is(err, rundir.ErrNoBest) {
		writeError(w, http.StatusConflict, err)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// runEvents streams the run's journal as Server-Sent Events, one record a message, from the
// start, until the run ends (or the client goes).
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, u store.User) {
	run, ok := s.run(w, r, u)
	if !ok {
		return
	}
	if !s.openStream(w, u.Name) {
		return
	}
	defer s.closeStream(u.Name)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	dir := s.dirOf(r.Context(), run)
	tail := journal.NewTail(filepath.Join(dir, rundir.Journal), 1<<20)
	for {
		events, err := tail.Next()
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", jsonLine(map[string]string{"error": err.Error()}))
			return
		}
		for _, e := range events {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", tail.Line(), jsonLine(e))
		}
		if flusher != nil {
			flusher.Flush()
		}
		if len(events) == 0 {
			cur, err := s.cfg.Store.Run(r.Context(), run.ID)
			if err != nil || cur.State.Settled() {
				fmt.Fprintf(w, "event: end\ndata: %s\n\n", jsonLine(map[string]string{"state": string(cur.State)}))
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			s.dirOf(r.Context(), run) // another server's run: what it has copied since
		}
	}
}

// MaxTailLines bounds a log's ?tail: more is the whole log, which a request without it gets.
const MaxTailLines = 1_000_000

// runLogs writes the run's driver log, or with ?trial=ID that trial's log; with ?tail=N it
// starts at the last N lines (`logs -n`); with ?follow=1 it goes on writing what is appended
// until the run ends or the client goes.
func (s *Server) runLogs(w http.ResponseWriter, r *http.Request, u store.User) {
	tail := -1
	if q := r.URL.Query().Get("tail"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > MaxTailLines {
			writeError(w, http.StatusBadRequest, fmt.Errorf("tail %q: a number of lines from 0 to %d", boundText(q, 64), MaxTailLines))
			return
		}
		tail = n
	}
	run, ok := s.run(w, r, u)
	if !ok {
		return
	}
	dir := s.dirOf(r.Context(), run)
	path := filepath.Join(dir, rundir.DriverLog)
	if id := r.URL.Query().Get("trial"); id != "" {
		v, ok := s.view(w, r, u)
		if !ok {
			return
		}
		events, err := v.AllEvents()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		p, err := rundir.TrialLog(dir, events, id)
		if err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		path = p
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	follow := r.URL.Query().Has("follow")
	f, err := os.Open(path)
	if err != nil && !follow {
		writeError(w, http.StatusNotFound, fmt.Errorf("run %s has no such log yet", run.ID))
		return
	}
	if follow {
		if !s.openStream(w, u.Name) {
			return
		}
		defer s.closeStream(u.Name)
	}
	w.WriteHeader(http.StatusOK)
	for f == nil { // a queued run's log is not written yet: wait for it, or for the run's end
		cur, err := s.cfg.Store.Run(r.Context(), run.ID)
		if err != nil || cur.State.Settled() {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		s.dirOf(r.Context(), run)
		f, _ = os.Open(path)
	}
	defer f.Close()
	if tail >= 0 {
		if err := rundir.SeekTail(f, tail); err != nil {
			return
		}
	}
	if _, err := io.Copy(flushWriter{w}, f); err != nil || !follow {
		return
	}
	// Follow while a driver writes; between drivers (a restart, a server taking over) wait for
	// the next; stop once the run has ended and its last lines are out.
	for {
		if err := rundir.Follow(r.Context(), dir, f, flushWriter{w}); err != nil || r.Context().Err() != nil {
			return
		}
		cur, err := s.cfg.Store.Run(r.Context(), run.ID)
		if err != nil || cur.State.Settled() {
			io.Copy(flushWriter{w}, f)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		s.dirOf(r.Context(), run)
	}
}

// flushWriter flushes each write, so that a follower sees lines as they come.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

func (s *Server) listTeams(w http.ResponseWriter, r *http.Request, u store.User) {
	teams, err := s.cfg.Store.Teams(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	type teamJSON struct {
		store.Team
		SpentUSD float64 `json:"spent_this_month_usd"`
	}
	out := make([]teamJSON, len(teams))
	for i, t := range teams {
		spent, err := s.cfg.Store.Spent(r.Context(), t.Name, month(s.cfg.Now()))
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		out[i] = teamJSON{t, spent}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createTeam(w http.ResponseWriter, r *http.Request, u store.User) {
	var t store.Team
	if !readJSON(w, r, &t) {
		return
	}
	t.CreatedAt = s.cfg.Now()
	if err := CreateTeam(r.Context(), s.cfg.Store, t, u.Name); err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

// updateTeam changes what the body gives of a team's limits, and leaves the rest.
func (s *Server) updateTeam(w http.ResponseWriter, r *http.Request, u store.User) {
	var c TeamChange
	if !readJSON(w, r, &c) {
		return
	}
	t, err := UpdateTeam(r.Context(), s.cfg.Store, r.PathValue("name"), c, u.Name)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	s.poke()
	writeJSON(w, http.StatusOK, t)
}

// validName says whether a team or user name is safe as a folder name and in a URL path.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '-' || s[0] == '.' || s[0] == '_' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.", c)) {
			return false
		}
	}
	return true
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, u store.User) {
	users, err := s.cfg.Store.Users(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, users)
}

// createUser adds a user and returns their token, the only time it is shown.
func (s *Server) createUser(w http.ResponseWriter, r *http.Request, u store.User) {
	var nu store.User
	if !readJSON(w, r, &nu) {
		return
	}
	token, err := AddUser(r.Context(), s.cfg.Store, nu.Name, nu.Team, nu.Admin, s.cfg.Now(), u.Name)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"name": nu.Name, "team": nu.Team, "admin": nu.Admin, "token": token})
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, u store.User) {
	name := r.PathValue("name")
	gone, err := s.cfg.Store.User(r.Context(), name)
	if err == nil {
		err = s.cfg.Store.DeleteUser(r.Context(), name)
	}
	if err != nil {
		writeStoreError(w, err)
		return
	}
	s.recordFor(r.Context(), u.Name, gone.Team, "user-delete", name, "")
	w.WriteHeader(http.StatusNoContent)
}

// audit lists the audit log: a team's entries for its members, everything for admins.
func (s *Server) audit(w http.ResponseWriter, r *http.Request, u store.User) {
	f := store.AuditFilter{Team: u.Team, Limit: 100}
	if u.Admin {
		f.Team = r.URL.Query().Get("team")
	}
	entries, err := s.cfg.Store.Audit(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, entries)
}

// AddUser adds a user of team and returns their token (shown once; the store keeps its hash);
// the audit log shows it to the team as by's action.
func AddUser(ctx context.Context, st store.Store, name, team string, admin bool, now time.Time, by string) (string, error) {
	if !validName(name) {
		return "", &InputError{Err: fmt.Errorf("user name %q: 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit", name)}
	}
	token, hash, err := NewToken(rand.Reader)
	if err != nil {
		return "", err
	}
	err = st.CreateUser(ctx, store.User{Name: name, Team: team, Admin: admin, TokenHash: hash, CreatedAt: now})
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("user %s: no team %q (`rubberband server teams add %s` makes it): %w", name, team, team, err)
	}
	if err != nil {
		return "", err
	}
	return token, audit(ctx, st, by, team, "user-create", name, fmt.Sprintf("team %s, admin %v", team, admin))
}

// record adds an audit entry of u's own team; an audit that cannot be written is logged, not
// fatal to the action.
func (s *Server) record(ctx context.Context, u store.User, action, target, detail string) {
	s.recordFor(ctx, u.Name, u.Team, action, target, detail)
}

// recordFor adds an audit entry shown to team: the team an action concerns, whoever acted.
func (s *Server) recordFor(ctx context.Context, user, team, action, target, detail string) {
	e := store.AuditEntry{At: s.cfg.Now(), User: user, Team: team, Action: action, Target: target, Detail: detail}
	if err := s.cfg.Store.AddAudit(context.WithoutCancel(ctx), e); err != nil {
		fmt.Fprintf(s.cfg.Log, "server: audit %s %s by %s: %v\n", action, target, user, err)
	}
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read the request: %w", err))
		return false
	}
	return true
}

func writeStoreError(w http.ResponseWriter, err error) {
	var in *InputError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, store.ErrInvalid):
		writeError(w, http.StatusBadRequest, err)
	case errors.As(err, &in):
		writeError(w, http.StatusUnprocessableEntity, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

// writeError answers err's message, within MaxErrorBytes: it may quote what was sent.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": boundText(err.Error(), MaxErrorBytes)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	format.JSON(w, v)
}

func jsonLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
