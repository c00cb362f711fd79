package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

const testSpec = `name: hand-made
deadline: 2m
seed: 3
objective: {metric: score, mode: max}
algorithm: {stages: [{trials: 2, iters: 1}, {trials: 1, iters: 2}]}
search_space:
  x: {type: choice, values: ["<img src=x onerror=alert(1)>", "b"]}
trainer: {command: [rubberband, trainer, synthetic], env: {VISIBLE_IN_SPEC: "as-written"}}
cluster: {gpus_per_node: 2, price_per_hour: 10, billing: {minimum: 0s}, scale_latency: {value: 5s}, init_latency: {value: 1s}, max_nodes: 2}
profile: {iter_latency: {1: {mean: 4, std: 0.1}, 2: {mean: 2.5, std: 0.1}}, startup_latency: {value: 1s}}
planner: {samples: 50}
`

// handMade writes a run's state directory under root: its spec, plan and run.json, a journal
// of the events given, and a trial log with markup in it. It returns the journal, open.
func handMade(t *testing.T, root, name string, events []journal.Event) *journal.Journal {
	t.Helper()
	dir := filepath.Join(root, name)
	os.MkdirAll(filepath.Join(dir, rundir.LogsDir), 0o755)
	os.WriteFile(filepath.Join(dir, rundir.SpecCopy), []byte(testSpec), 0o644)
	exp, err := spec.Parse("spec.yaml", []byte(testSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, _, err := planner.PlanSpec(context.Background(), exp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	os.WriteFile(filepath.Join(dir, rundir.PlanFile), b, 0o644)
	b, _ = json.Marshal(rundir.RunFile{RunID: "r-" + name, Backend: "local", TimeScale: 1, Samples: 50, Seed: 3})
	os.WriteFile(filepath.Join(dir, rundir.RunJSON), b, 0o644)
	os.WriteFile(filepath.Join(dir, rundir.LogsDir, "b0-t0000.log"), []byte("line one\n<script>alert('log')</script>\n"), 0o644)
	j, _, err := journal.OpenJournal(filepath.Join(dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	for _, e := range events {
		if err := j.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func score(v float64) *float64 { return &v }

// firstStage is a run's journal through its first stage's sync, with an interruption and a
// re-plan, and a hostile parameter value.
func firstStage() []journal.Event {
	node := &cloud.Node{ID: "local-0", GPUs: 2, RunningAt: at(5)}
	return []journal.Event{
		{Ev: journal.EvStart, At: at(0), RunID: "r-x"},
		{Ev: journal.EvTrial, At: at(0), Trial: "b0-t0000", Params: spec.Config{"x": "<img src=x onerror=alert(1)>"}},
		{Ev: journal.EvTrial, At: at(0), Trial: "b0-t0001", Params: spec.Config{"x": "b"}},
		{Ev: journal.EvStage, At: at(0)},
		{Ev: journal.EvNodeUp, At: at(6), Node: node},
		{Ev: journal.EvLaunch, At: at(6), Trial: "b0-t0000", Try: 1, GPUs: 1, Nodes: []string{"local-0"}},
		{Ev: journal.EvLaunch, At: at(6), Trial: "b0-t0001", Try: 1, GPUs: 1, Nodes: []string{"local-0"}},
		{Ev: journal.EvReport, At: at(10), Trial: "b0-t0000", Iter: 1, Metrics: map[string]float64{"score": 0.7}},
		{Ev: journal.EvDone, At: at(10), Trial: "b0-t0000", Iter: 1, Metric: score(0.7), Metrics: map[string]float64{"score": 0.7}},
		{Ev: journal.EvReport, At: at(11), Trial: "b0-t0001", Iter: 1, Metrics: map[string]float64{"score": 0.4}},
		{Ev: journal.EvDone, At: at(11), Trial: "b0-t0001", Iter: 1, Metric: score(0.4), Metrics: map[string]float64{"score": 0.4}},
		{Ev: journal.EvSync, At: at(11), Keep: []string{"b0-t0000"}},
		{Ev: journal.EvReplan, At: at(11.5), Stage: 1, Plan: []sim.StageAlloc{{GPUs: 2, Nodes: 1}}, Reason: "the plan now <b>misses</b>",
			Before: &planner.Forecast{JCT: 130, MissProb: 0.6, Cost: 0.2}, After: &planner.Forecast{JCT: 100, MissProb: 0.05, Cost: 0.25}},
		{Ev: journal.EvStage, At: at(12), Stage: 1},
		{Ev: journal.EvInterrupt, At: at(12.5), Nodes: []string{"local-0"}, Error: "spot notice"},
	}
}

func newTestServer(t *testing.T, cfg Config, watch ...func(*Server)) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range watch {
		w(s)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); hs.Close() })
	return s, hs
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Every page of a hand-made run: what it shows, and hostile text escaped everywhere.
func TestPages(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "hand", firstStage())
	t.Setenv("RB_UI_TEST_SECRET", "never-rendered-secret")
	_, hs := newTestServer(t, Config{Root: root})
	code, runs := get(t, hs.URL+"/")
	if code != 200 || !strings.Contains(runs, `data-run="hand"`) || !strings.Contains(runs, "interrupted") || !strings.Contains(runs, "1/2") {
		t.Fatalf("runs page %d:\n%s", code, runs)
	}
	code, page := get(t, hs.URL+"/runs/hand")
	if code != 200 {
		t.Fatalf("run page %d: %s", code, page)
	}
	for _, want := range []string{
		`id="done" data-value="2"`, `id="total">3<`, `id="best" data-value="0.7"`, // progress; the best so far
		`id="gantt-planned"`, `id="gantt-realized"`, `class="replan"`, `class="interrupt"`, `class="prov"`, // both schedules, marked
		`re-plan at 11.5s: stages from stage 2`, `id="revisions"`, `the plan now &lt;b&gt;misses&lt;/b&gt;`, // the revision listed, escaped
		`P(miss) 60% → 5%`, `id="forecast"`, `id="cost"`, `id="time"`, `id="curves"`, `promoted`,
		`x=&lt;img src=x onerror=alert(1)&gt;`,  // a hostile param, escaped
		`hand-made · planner greedy`,            // the plan, as `rubberband plan` prints it
		`VISIBLE_IN_SPEC: &#34;as-written&#34;`, // the spec as written
		`/runs/hand/trials/b0-t0000/log`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	for _, bad := range []string{"<img src=x", "never-rendered-secret", `id="cancel"`} {
		if strings.Contains(page, bad) || strings.Contains(runs, bad) {
			t.Errorf("a page holds %q", bad)
		}
	}
	code, log := get(t, hs.URL+"/runs/hand/trials/b0-t0000/log?n=1")
	if code != 200 || !strings.Contains(log, "&lt;script&gt;alert(&#39;log&#39;)&lt;/script&gt;") || strings.Contains(log, "<script>alert") || strings.Contains(log, "line one") {
		t.Fatalf("log tail %d:\n%s", code, log)
	}
	for path, want := range map[string]int{
		"/runs/nope": 404, "/runs/hand/trials/b9-t9999/log": 404, "/runs/hand/trials/..%2f..%2frun.json/log": 404,
		"/runs/nope/events": 404, "/runs/hand/cancel": 405,
	} {
		if code, _ := get(t, hs.URL+path); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	resp, _ := http.Get(hs.URL + "/")
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	resp.Body.Close()
}

// readUpdate reads the next update event of a stream.
func readUpdate(t *testing.T, r *bufio.Reader, within time.Duration) update {
	t.Helper()
	got := make(chan update, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var u update
				json.Unmarshal([]byte(data), &u)
				got <- u
				return
			}
		}
	}()
	select {
	case u, ok := <-got:
		if !ok {
			t.Fatal("the stream ended")
		}
		return u
	case <-time.After(within):
		t.Fatal("no update in time")
	}
	return update{}
}

// The stream pushes what is appended to the journal, re-rendered, and only that: the same state
// as a page opened afterwards; streams are bounded.
func TestStreamFollowsTheJournal(t *testing.T) {
	root := t.TempDir()
	events := firstStage()
	j := handMade(t, root, "live", events[:11])
	_, hs := newTestServer(t, Config{Root: root, Poll: 10 * time.Millisecond, MaxStreams: 1})
	resp, err := http.Get(hs.URL + "/runs/live/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	u := readUpdate(t, r, 5*time.Second)
	if u.Seq != 11 || !strings.Contains(string(u.Sections["header"]), `id="done" data-value="2"`) {
		t.Fatalf("first update: seq %d, header %s", u.Seq, u.Sections["header"])
	}
	if code, _ := get(t, hs.URL+"/runs/live/events"); code != http.StatusServiceUnavailable {
		t.Errorf("a second stream over the bound of 1: %d", code)
	}
	for _, e := range events[11:] {
		j.Append(e)
	}
	u2 := readUpdate(t, r, 5*time.Second)
	for u2.Seq < len(events) { // the appends may land in more than one poll
		if u2.Seq <= u.Seq {
			t.Fatalf("an update went back: seq %d after %d", u2.Seq, u.Seq)
		}
		u2 = readUpdate(t, r, 5*time.Second)
	}
	if u2.Seq != len(events) || u2.Version <= u.Version || !strings.Contains(string(u2.Sections["gantt"]), `class="replan"`) {
		t.Fatalf("after the appends: seq %d version %d, replan marked: %v", u2.Seq, u2.Version, strings.Contains(string(u2.Sections["gantt"]), "replan"))
	}
	_, page := get(t, hs.URL+"/runs/live")
	if !strings.Contains(page, string(u2.Sections["progress"])) {
		t.Errorf("a page opened now differs from the stream's last update")
	}
}

// Cancel: refused when read-only, without the form's token, or from another origin; else the
// run is cancelled as `rubberband cancel` does it (its driver is gone: here, journaled).
func TestCancel(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "c", firstStage())
	_, ro := newTestServer(t, Config{Root: root})
	if code, _ := post(t, ro.URL+"/runs/c/cancel", url.Values{"csrf": {"x"}}, nil); code != http.StatusForbidden {
		t.Errorf("read-only cancel: %d", code)
	}
	cancelled := func() bool { // as status and the dashboard say it
		st, err := rundir.Open(filepath.Join(root, "c"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := rundir.NewView(st)
		if err != nil {
			t.Fatal(err)
		}
		status, _ := v.Status()
		return status == "cancelled"
	}
	cancel := func(ctx context.Context, dir string) error { // what `rubberband cancel DIR` does
		st, err := rundir.Open(dir)
		if err != nil {
			return err
		}
		_, err = driver.Cancel(ctx, st, 2*time.Minute, io.Discard)
		return err
	}
	s, hs := newTestServer(t, Config{Root: root, AllowCancel: true, Cancel: cancel})
	_, page := get(t, hs.URL+"/runs/c")
	if !strings.Contains(page, `id="cancel"`) { // interrupted: a cancel releases what it holds
		t.Errorf("no cancel button on an interrupted run")
	}
	tok := s.csrf("cancel", "c")
	if code, _ := post(t, hs.URL+"/runs/c/cancel", url.Values{}, nil); code != http.StatusForbidden {
		t.Errorf("without the form token: %d", code)
	}
	if code, _ := post(t, hs.URL+"/runs/c/cancel", url.Values{"csrf": {s.csrf("cancel", "other")}}, nil); code != http.StatusForbidden {
		t.Errorf("another run's token: %d", code)
	}
	if code, _ := post(t, hs.URL+"/runs/c/cancel", url.Values{"csrf": {tok}}, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("from another origin: %d", code)
	}
	if cancelled() {
		t.Fatal("cancelled by a refused request")
	}
	code, page := post(t, hs.URL+"/runs/c/cancel", url.Values{"csrf": {tok}}, nil)
	if code != http.StatusSeeOther || !cancelled() {
		t.Fatalf("cancel: %d, cancelled %v\n%s", code, cancelled(), page)
	}
}

func post(t *testing.T, u string, form url.Values, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The plan page: a spec under the root or a pasted one, planned with the caller's planning and
// swept over deadlines; a pasted spec is bounded and reads no file.
func TestPlanPage(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "p", nil)
	os.WriteFile(filepath.Join(root, "job.yaml"), []byte(testSpec), 0o644)
	os.WriteFile(filepath.Join(root, "secret.txt"), []byte("do not read"), 0o644)
	s, hs := newTestServer(t, Config{Root: root})
	code, page := get(t, hs.URL+"/plan")
	if code != 200 || !strings.Contains(page, `value="job.yaml"`) || !strings.Contains(page, `value="run:p"`) {
		t.Fatalf("plan page %d:\n%s", code, page)
	}
	tok := s.csrf("plan", "")
	for _, choice := range []string{"job.yaml", "run:p"} {
		code, page = get(t, hs.URL+"/plan?spec="+url.QueryEscape(choice)+"&csrf="+tok) // as the form sends it
		if code != 200 || !strings.Contains(page, "hand-made · planner greedy") || !strings.Contains(page, `id="deadline-curve"`) || !strings.Contains(page, "optimal") {
			t.Fatalf("plan %s: %d:\n%s", choice, code, page)
		}
	}
	if code, _ := get(t, hs.URL+"/plan?spec=../etc/passwd&csrf="+tok); code != 400 {
		t.Errorf("a spec not offered: %d", code)
	}
	code, page = post(t, hs.URL+"/plan", url.Values{"csrf": {tok}, "spec": {strings.Replace(testSpec, "name: hand-made", "name: pasted-job", 1)}}, nil)
	if code != 200 || !strings.Contains(page, "pasted-job · planner greedy") {
		t.Fatalf("pasted: %d:\n%s", code, page)
	}
	withFile := strings.Replace(testSpec, "profile: {iter_latency: {1: {mean: 4, std: 0.1}, 2: {mean: 2.5, std: 0.1}}, startup_latency: {value: 1s}}", "profile: {file: secret.txt}", 1)
	code, page = post(t, hs.URL+"/plan", url.Values{"csrf": {tok}, "spec": {withFile}}, nil)
	if code != 400 || !strings.Contains(page, "may not name files") || strings.Contains(page, "do not read") {
		t.Fatalf("a pasted spec naming a file: %d:\n%s", code, page)
	}
	if code, _ := post(t, hs.URL+"/plan", url.Values{"csrf": {tok}, "spec": {strings.Repeat("#", MaxPastedSpec+10)}}, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized spec: %d", code)
	}
	if code, _ := post(t, hs.URL+"/plan", url.Values{"spec": {testSpec}}, nil); code != http.StatusForbidden {
		t.Errorf("a paste without the form token: %d", code)
	}
	// A browser that goes away stops the sweep: a cancelled context plans no point.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	exp, _ := spec.Parse("x.yaml", []byte(testSpec), nil)
	if _, _, err := deadlineCurves(ctx, exp); err == nil {
		t.Errorf("the sweep went on after its context ended")
	}
}

// With a token, every request needs it; without one, only loopback host names are answered.
func TestToken(t *testing.T) {
	root := t.TempDir()
	_, hs := newTestServer(t, Config{Root: root, Token: "s3cret"})
	if code, _ := get(t, hs.URL+"/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	req, _ := http.NewRequest("GET", hs.URL+"/static/app.js", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("bearer: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	_, open := newTestServer(t, Config{Root: root})
	req, _ = http.NewRequest("GET", open.URL+"/", nil)
	req.Host = "rebound.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign host name without a token: %v %v", resp.StatusCode, err)
	}
}

// The plan page plans an ASHA spec as `rubberband plan` does (its GPU schedule beside fixed
// slots and synchronous SHA) and sweeps the deadline with those three. Before, it planned the
// spec as synchronous SHA and showed "no plan" in every column at every deadline.
func TestPlanPageOfASHA(t *testing.T) {
	root := t.TempDir()
	text, err := os.ReadFile("../examples/asha-quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "asha.yaml"), text, 0o644)
	s, hs := newTestServer(t, Config{Root: root})
	code, page := get(t, hs.URL+"/plan?spec=asha.yaml&csrf="+s.csrf("plan", ""))
	if code != 200 {
		t.Fatalf("plan: %d:\n%s", code, page)
	}
	for _, want := range []string{"asha-quickstart · asha, 48 trials", "asha, elastic", "asha, fixed slots", "sha, synchronous",
		"<th>" + planner.ASHAElastic + "</th>", "<th>" + planner.SHASync + "</th>", `id="deadline-curve"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the ASHA plan page has no %s", want)
		}
	}
	if n := strings.Count(page, "<td>no plan</td>"); n > 0 {
		t.Errorf("%d sweep cells say no plan", n)
	}
	if strings.Contains(page, "planner greedy") {
		t.Error("the ASHA spec was planned by stages")
	}
}
