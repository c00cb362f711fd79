package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
)

// api is a server over a real SQLite store, its drive loop not started: the handlers alone.
type api struct {
	t      *testing.T
	srv    *httptest.Server
	tokens map[string]string
	st     store.Store
	root   string // the server's --root
}

func newAPI(t *testing.T) *api {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, tm := range []store.Team{{Name: "ml", MaxGPUs: 8, MonthlyBudgetUSD: 50}, {Name: "cv"}} {
		if err := st.CreateTeam(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	a := &api{t: t, tokens: map[string]string{}, st: st, root: filepath.Join(dir, "root")}
	for _, u := range []struct {
		name, team string
		admin      bool
	}{{"alice", "ml", false}, {"carol", "cv", false}, {"root", "cv", true}} {
		tok, err := server.AddUser(ctx, st, u.name, u.team, u.admin, time.Now(), "test")
		if err != nil {
			t.Fatal(err)
		}
		a.tokens[u.name] = tok
	}
	s := server.New(server.Config{Store: st, Root: a.root, Backend: "virtual", Holder: "test"})
	a.srv = httptest.NewServer(s.Handler())
	t.Cleanup(a.srv.Close)
	return a
}

// do sends a request as user ("" for none) and returns the status and body.
func (a *api) do(user, method, path string, body any) (int, string) {
	a.t.Helper()
	var r *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	return a.send(user, method, path, "", r)
}

// send sends body (of contentType, when not "") as user ("" for none) and returns the status and
// the answer's body.
func (a *api) send(user, method, path, contentType string, body io.Reader) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.srv.URL+path, body)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+a.tokens[user])
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

func TestAPIAuthentication(t *testing.T) {
	a := newAPI(t)
	if code, _ := a.do("", "GET", "/api/v1/health", nil); code != 200 {
		t.Errorf("health without a token: %d", code)
	}
	for _, path := range []string{"/api/v1/runs", "/api/v1/whoami", "/api/v1/teams", "/api/v1/audit"} {
		if code, _ := a.do("", "GET", path, nil); code != 401 {
			t.Errorf("%s without a token: %d", path, code)
		}
	}
	req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer rbt_forged")
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 401 {
		t.Errorf("a forged token: %d", resp.StatusCode)
	}
	if code, body := a.do("alice", "GET", "/api/v1/whoami", nil); code != 200 || !strings.Contains(body, `"team": "ml"`) || strings.Contains(body, "token") {
		t.Errorf("whoami: %d %s", code, body)
	}
	// Admin endpoints: 403 for a user, 200 for an admin; a new user's token comes back once.
	if code, _ := a.do("alice", "GET", "/api/v1/teams", nil); code != 403 {
		t.Errorf("teams as a user: %d", code)
	}
	code, body := a.do("root", "POST", "/api/v1/users", map[string]any{"name": "bob", "team": "ml"})
	if code != 201 || !strings.Contains(body, `"token": "rbt_`) {
		t.Fatalf("add bob: %d %s", code, body)
	}
	if code, body := a.do("root", "GET", "/api/v1/users", nil); code != 200 || strings.Contains(body, "rbt_") || strings.Contains(strings.ToLower(body), "hash") {
		t.Errorf("users list shows tokens: %s", body)
	}
	if code, _ := a.do("root", "POST", "/api/v1/teams", map[string]any{"name": "../etc"}); code != 422 {
		t.Errorf("a team named ../etc: %d", code)
	}
	if code, _ := a.do("root", "POST", "/api/v1/teams", map[string]any{"name": "ml"}); code != 409 {
		t.Errorf("a second team ml: %d", code)
	}
}

// A spec with problems comes back 422 with each problem naming its field and line; a spec over
// the team's budget 403 with both figures; one that fits is queued, and the other team neither
// sees nor cancels it.
func TestAPISubmit(t *testing.T) {
	a := newAPI(t)
	code, body := a.do("alice", "POST", "/api/v1/runs", server.Submission{Name: "bad.yaml", Spec: "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 0}}\n"})
	if code != 422 || !strings.Contains(body, "bad.yaml:3") {
		t.Fatalf("a bad spec: %d %s", code, body)
	}
	spec, err := os.ReadFile("../e2e/testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	costly := strings.Replace(string(spec), "price_per_hour: 12", "price_per_hour: 12000", 1)
	code, body = a.do("alice", "POST", "/api/v1/runs", server.Submission{Spec: costly})
	if code != 403 || !strings.Contains(body, `"reason": "budget"`) || !strings.Contains(body, `"remaining_budget_usd": 50`) {
		t.Fatalf("over budget: %d %s", code, body)
	}
	code, body = a.do("alice", "POST", "/api/v1/runs", server.Submission{Spec: string(spec)})
	if code != 201 || !strings.Contains(body, `"state": "queued"`) {
		t.Fatalf("submit: %d %s", code, body)
	}
	var out struct{ Run store.Run }
	json.Unmarshal([]byte(body), &out)
	id := out.Run.ID
	if code, _ := a.do("carol", "GET", "/api/v1/runs/"+id, nil); code != 404 {
		t.Errorf("carol reads alice's run: %d", code)
	}
	if code, _ := a.do("carol", "POST", "/api/v1/runs/"+id+"/cancel", nil); code != 403 {
		t.Errorf("carol cancels alice's run: %d", code)
	}
	if code, body := a.do("root", "GET", "/api/v1/runs/"+id, nil); code != 200 || !strings.Contains(body, id) {
		t.Errorf("an admin reads it: %d", code)
	}
	// Cancelling a queued run ends it at once.
	if code, body := a.do("alice", "POST", "/api/v1/runs/"+id+"/cancel", nil); code != 202 || !strings.Contains(body, `"state": "cancelled"`) {
		t.Errorf("cancel: %d %s", code, body)
	}
	// The events of a run that ended close with its state.
	code, body = a.do("alice", "GET", "/api/v1/runs/"+id+"/events", nil)
	if code != 200 || !strings.Contains(body, "event: end") || !strings.Contains(body, `"state":"cancelled"`) {
		t.Errorf("events: %d %s", code, body)
	}
}

// A run submitted while its team's other runs hold part of its quota is planned for the share
// they leave free (it starts at once), not for the whole quota (it would wait).
func TestSubmitPlansForTheFreeShare(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	// Team ml may hold 8 GPUs; a running run holds one node of 4.
	if err := a.st.CreateRun(ctx, store.Run{ID: "held", Team: "ml", User: "alice", Name: "x", State: store.Running, SubmittedAt: time.Now(), StartedAt: time.Now(), GPUs: 4, Nodes: 1, PredictedJCTSeconds: 3600}); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../e2e/testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Its fastest plan wants 4 nodes; the deadline is loose enough for one.
	code, body := a.do("alice", "POST", "/api/v1/runs", server.Submission{Spec: strings.Replace(string(spec), "deadline: 10m", "deadline: 2h", 1)})
	var out struct {
		Run  store.Run
		Plan struct {
			Cluster struct {
				MaxNodes int `json:"max_nodes"`
			}
		}
	}
	if code != 201 || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("submit: %d %s", code, body)
	}
	if out.Plan.Cluster.MaxNodes != 1 || out.Run.Nodes != 1 || out.Run.GPUs > 4 {
		t.Fatalf("planned for max_nodes %d: %d GPUs on %d nodes; the free share is one node of 4 GPUs", out.Plan.Cluster.MaxNodes, out.Run.GPUs, out.Run.Nodes)
	}
}

// The dashboard is behind the same tokens: nothing without one; /?token= sets an HttpOnly cookie
// and drops the token from the address; the cookie then opens the team's dashboard.
func TestDashboardBehindTokens(t *testing.T) {
	a := newAPI(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(a.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the dashboard without a token: %d", resp.StatusCode)
	}
	resp, err = noRedirect.Get(a.srv.URL + "/?token=" + a.tokens["alice"])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "rb_token" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "token") || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("?token=: %d, Location %q, cookie %+v", resp.StatusCode, resp.Header.Get("Location"), cookie)
	}
	req, _ := http.NewRequest("GET", a.srv.URL+"/", nil)
	req.AddCookie(cookie)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Fatalf("the dashboard with the cookie: %d %.200s", resp.StatusCode, body)
	}
	// A forged cookie opens nothing.
	req, _ = http.NewRequest("GET", a.srv.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: "rb_token", Value: "rbt_forged"})
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged cookie: %v %v", resp.StatusCode, err)
	}
}
