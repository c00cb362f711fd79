package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// planCalls records what the dashboard's planning was asked to plan.
type planCalls struct {
	mu      sync.Mutex
	samples []int
	within  []time.Duration // how long the plan was given
}

func (p *planCalls) plan(ctx context.Context, exp *spec.Experiment) (*planner.Report, error) {
	p.mu.Lock()
	p.samples = append(p.samples, exp.Planner.Samples)
	if d, ok := ctx.Deadline(); ok {
		p.within = append(p.within, time.Until(d))
	} else {
		p.within = append(p.within, -1)
	}
	p.mu.Unlock()
	e := *exp
	e.Planner.Samples = 50 // the recorded bound is the test: keep the planning itself quick
	return planSpec(ctx, &e)
}

func (p *planCalls) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.samples)
}

// getWith GETs u with the headers given, without following redirects.
func getWith(t *testing.T, u string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// A plan page starts planning only when asked from this dashboard, and then within its bounds
// whatever the spec's source: a page of another site is refused before anything is planned, a
// link without proof of origin only shows the form, and a spec under the root (a run's or a
// file) or pasted is planned with MaxPageSamples samples at most.
func TestPlanIsSameOriginAndBounded(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "big", nil)
	b, _ := json.Marshal(rundir.RunFile{RunID: "r-big", Backend: "local", TimeScale: 1, Samples: 50000, Seed: 3})
	os.WriteFile(filepath.Join(root, "big", rundir.RunJSON), b, 0o644)
	bigSpec := strings.Replace(testSpec, "planner: {samples: 50}", "planner: {samples: 50000}", 1)
	os.WriteFile(filepath.Join(root, "big.yaml"), []byte(bigSpec), 0o644)
	calls := &planCalls{}
	s, hs := newTestServer(t, Config{Root: root}, func(s *Server) { s.planSpec = calls.plan })
	tok := s.csrf("plan", "")
	evil := "/plan?spec=" + url.QueryEscape("run:big") + "&csrf=" + tok // even with the form's token
	for name, hdr := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": "same-site"},
		"Origin elsewhere":          {"Origin": "http://evil.example"},
		"Referer elsewhere":         {"Referer": "http://evil.example/page"},
	} {
		if code, _, _ := getWith(t, hs.URL+evil, hdr); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	if n := calls.count(); n != 0 {
		t.Fatalf("cross-site requests started %d plans", n)
	}
	code, page, _ := getWith(t, hs.URL+"/plan?spec="+url.QueryEscape("run:big"), nil)
	if code != 200 || !strings.Contains(page, `id="plan-note"`) || !strings.Contains(page, `value="run:big" selected`) || calls.count() != 0 {
		t.Fatalf("a link without proof of origin: %d, %d plans:\n%s", code, calls.count(), page)
	}
	for _, tc := range []struct {
		name string
		do   func() (int, string)
	}{
		{"a run's spec, same-origin", func() (int, string) {
			code, page, _ := getWith(t, hs.URL+"/plan?spec="+url.QueryEscape("run:big"), map[string]string{"Sec-Fetch-Site": "same-origin"})
			return code, page
		}},
		{"a file's spec, with the form's token", func() (int, string) {
			code, page, _ := getWith(t, hs.URL+"/plan?spec=big.yaml&csrf="+tok, nil)
			return code, page
		}},
		{"a typed address", func() (int, string) {
			code, page, _ := getWith(t, hs.URL+"/plan?spec=big.yaml", map[string]string{"Sec-Fetch-Site": "none"})
			return code, page
		}},
		{"a pasted spec", func() (int, string) {
			return post(t, hs.URL+"/plan", url.Values{"csrf": {tok}, "spec": {bigSpec}}, nil)
		}},
	} {
		before := calls.count()
		code, page := tc.do()
		if code != 200 || !strings.Contains(page, "hand-made · planner greedy") || calls.count() != before+1 {
			t.Fatalf("%s: %d, %d plans:\n%s", tc.name, code, calls.count()-before, page)
		}
		calls.mu.Lock()
		samples, within := calls.samples[before], calls.within[before]
		calls.mu.Unlock()
		if samples != MaxPageSamples || !strings.Contains(page, fmt.Sprintf("Planned with %d samples, not the spec&#39;s 50000", MaxPageSamples)) {
			t.Errorf("%s: planned with %d samples (want %d, and the page saying so)", tc.name, samples, MaxPageSamples)
		}
		if within <= 0 || within > DefaultPlanTimeout {
			t.Errorf("%s: the plan was given %v, want at most %v", tc.name, within, DefaultPlanTimeout)
		}
	}
}

// Planning that outlasts Config.PlanTimeout is stopped, and the page says so.
func TestPlanTimeout(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "job.yaml"), []byte(testSpec), 0o644)
	_, hs := newTestServer(t, Config{Root: root, PlanTimeout: 50 * time.Millisecond}, func(s *Server) {
		s.planSpec = func(ctx context.Context, _ *spec.Experiment) (*planner.Report, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	})
	code, page, _ := getWith(t, hs.URL+"/plan?spec=job.yaml", map[string]string{"Sec-Fetch-Site": "same-origin"})
	if code != http.StatusServiceUnavailable || !strings.Contains(page, "planning was stopped after 50ms") {
		t.Fatalf("a plan over its time: %d:\n%s", code, page)
	}
}

// The token moves from the address into a cookie by a redirect to this site, whatever the path:
// "//host" and the like stay paths here.
func TestTokenRedirectStaysOnSite(t *testing.T) {
	_, hs := newTestServer(t, Config{Root: t.TempDir(), Token: "s3cret"})
	for path, want := range map[string]string{
		"/?token=s3cret":                         "/",
		"/runs/x?token=s3cret&v=2":               "/runs/x?v=2",
		"//evil.example/x?token=s3cret&v=2":      "/evil.example/x?v=2",
		"///evil.example?token=s3cret":           "/evil.example",
		"/%5Cevil.example?token=s3cret":          "/%5Cevil.example",
		"/%2F%2Fevil.example/x?token=s3cret":     "/%2F%2Fevil.example/x",
		"//%5Cevil.example/x?token=s3cret&v=%2F": "/%5Cevil.example/x?v=%2F",
	} {
		code, _, hdr := getWith(t, hs.URL+path, nil)
		loc := hdr.Get("Location")
		u, err := url.Parse(loc)
		if code != http.StatusSeeOther || loc != want || err != nil || u.Host != "" || u.Scheme != "" {
			t.Errorf("GET %s: %d to %q, want %q on this site", path, code, loc, want)
		}
	}
}

// One client cannot hold every live stream: beyond DefaultMaxStreamsPerClient it is refused 429,
// and another client still gets one.
func TestStreamsPerClient(t *testing.T) {
	root := t.TempDir()
	_, hs := newTestServer(t, Config{Root: root, Poll: 10 * time.Millisecond})
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	open := func(c *http.Client) *http.Response {
		t.Helper()
		resp, err := c.Get(hs.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	one := from("127.0.0.1")
	for i := range DefaultMaxStreamsPerClient {
		if resp := open(one); resp.StatusCode != 200 {
			t.Fatalf("stream %d of one client: %d", i+1, resp.StatusCode)
		}
	}
	resp := open(one)
	if resp.StatusCode == 200 {
		t.Fatalf("stream %d of one client: 200, want 429", DefaultMaxStreamsPerClient+1)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "at most 8 per client") {
		t.Fatalf("stream %d of one client: %d %s", DefaultMaxStreamsPerClient+1, resp.StatusCode, b)
	}
	if resp := open(from("127.0.0.2")); resp.StatusCode != 200 {
		t.Fatalf("another client's stream: %d", resp.StatusCode)
	}
}

// The dashboard's own forms, as a browser sends them under the pages' Referrer-Policy
// (no-referrer): Sec-Fetch-Site same-origin with "Origin: null". They are accepted; a browser
// that says another site is refused whatever its Origin, and without Sec-Fetch-Site an opaque
// origin (a sandboxed page elsewhere) is refused.
func TestOwnFormsAsABrowserSendsThem(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "c", firstStage())
	var cancelled int
	s, hs := newTestServer(t, Config{Root: root, AllowCancel: true, Cancel: func(context.Context, string) error { return nil }}, func(s *Server) {
		s.cancelRun = func(context.Context, string) error { cancelled++; return nil }
	})
	paste := url.Values{"csrf": {s.csrf("plan", "")}, "spec": {testSpec}}
	own := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}
	if code, page := post(t, hs.URL+"/plan", paste, own); code != 200 || !strings.Contains(page, "hand-made · planner greedy") {
		t.Fatalf("the paste form: %d:\n%s", code, page)
	}
	for name, hdr := range map[string]map[string]string{
		"cross-site, its Origin this one": {"Sec-Fetch-Site": "cross-site", "Origin": hs.URL},
		"no Sec-Fetch-Site, Origin null":  {"Origin": "null"},
	} {
		if code, _ := post(t, hs.URL+"/plan", paste, hdr); code != http.StatusForbidden {
			t.Errorf("paste, %s: %d, want 403", name, code)
		}
		if code, _ := post(t, hs.URL+"/runs/c/cancel", url.Values{"csrf": {s.csrf("cancel", "c")}}, hdr); code != http.StatusForbidden {
			t.Errorf("cancel, %s: %d, want 403", name, code)
		}
	}
	if cancelled != 0 {
		t.Fatalf("refused requests cancelled %d times", cancelled)
	}
	if code, _ := post(t, hs.URL+"/runs/c/cancel", url.Values{"csrf": {s.csrf("cancel", "c")}}, own); code != http.StatusSeeOther || cancelled != 1 {
		t.Fatalf("the cancel form: %d, cancelled %d", code, cancelled)
	}
}
