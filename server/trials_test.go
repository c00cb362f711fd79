package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// The API answers a run's trials a page at a time: ?offset= and ?limit= choose it, X-Total-Count
// says how many there are and Link where the next page is; a bad page is a 400.
func TestAPITrialsArePaged(t *testing.T) {
	a := newAPI(t)
	if _, err := rundirtest.Large(filepath.Join(a.root, "teams", "ml"), "r1", 27, 9, 0); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := a.st.CreateRun(t.Context(), store.Run{ID: "r1", Team: "ml", User: "alice", Name: "large", State: store.Queued,
		SubmittedAt: now, Spec: []byte("name: large\n"), Plan: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	page := func(query string) (int, []runstate.TrialResult, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/runs/r1/trials"+query, nil)
		req.Header.Set("Authorization", "Bearer "+a.tokens["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var trials []runstate.TrialResult
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&trials); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, trials, resp.Header
	}
	for _, c := range []struct {
		query, first, link string
		n                  int
	}{
		{"", "b0-t0000", "", 27},
		{"?limit=10", "b0-t0000", `</api/v1/runs/r1/trials?offset=10&limit=10>; rel="next"`, 10},
		{"?offset=20&limit=10", "b0-t0020", "", 7},
	} {
		code, trials, h := page(c.query)
		if code != http.StatusOK || len(trials) != c.n || trials[0].ID != c.first {
			t.Fatalf("%s: %d, %d trials; want 200, %d from %s", c.query, code, len(trials), c.n, c.first)
		}
		if h.Get("X-Total-Count") != "27" || h.Get("Link") != c.link {
			t.Errorf("%s: X-Total-Count %q, Link %q; want 27, %q", c.query, h.Get("X-Total-Count"), h.Get("Link"), c.link)
		}
	}
	if code, _, _ := page("?limit=0"); code != http.StatusBadRequest {
		t.Errorf("?limit=0: %d; want 400", code)
	}
}
