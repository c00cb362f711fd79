package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// A server's answers the user must act on have the CLI's exit codes; anything else has none.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&Error{Status: 422, Message: "no plan meets the deadline"}, driver.ExitInfeasible},
		{&Error{Status: 422, Message: "spec: 2 problems"}, driver.ExitInvalid},
		{&Error{Status: 403, Message: "over the team's quota"}, driver.ExitInvalid},
		{&Error{Status: 404, Message: "no run r9"}, driver.ExitInvalid},
		{&Error{Status: 409, Message: "not paused"}, driver.ExitInvalid},
		{&Error{Status: 429, Message: "queue full"}, driver.ExitInvalid},
		{&Error{Status: 500, Message: "store down"}, 0},
		{fmt.Errorf("send: %w", &codebundle.TooLargeError{Dir: "."}), driver.ExitInvalid},
		{fmt.Errorf("wrapped: %w", &Error{Status: 404}), 0}, // only the server's own answer
		{errors.New("connection refused"), 0},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// fakeServer answers a run's endpoints: r1, paused, with a driver log and no report.
func fakeServer(t *testing.T, runs []Run) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(runs) })
	mux.HandleFunc("GET /api/v1/runs/r1", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(runs[0]) })
	mux.HandleFunc("GET /api/v1/runs/r1/logs", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "stage 1/2") })
	mux.HandleFunc("GET /api/v1/runs/r1/events", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "event: end\ndata: {}\n\n") })
	mux.HandleFunc("GET /api/v1/runs/r1/report", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"no report yet"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A followed run that paused: its log, then its state and why on the log, the run itself as
// its JSON (it has no report), and the paused exit code.
func TestFollowToEndPaused(t *testing.T) {
	c := fakeServer(t, []Run{{Run: store.Run{ID: "r1", Name: "job", State: store.Paused, Message: "disk full"}}})
	var out, log bytes.Buffer
	code, err := c.FollowToEnd(context.Background(), "r1", "json", &out, &log)
	if err != nil || code != driver.ExitPaused {
		t.Fatalf("code %d, %v", code, err)
	}
	if log.String() != "stage 1/2\nr1 job: paused (disk full)\n" {
		t.Errorf("log: %q", log.String())
	}
	var run Run
	if err := json.Unmarshal(out.Bytes(), &run); err != nil || run.ID != "r1" || !strings.Contains(out.String(), "\n  \"id\"") {
		t.Errorf("out: %v\n%s", err, out.String())
	}
}

// The server's runs print as a table or JSON, or say there are none.
func TestPrintRuns(t *testing.T) {
	var out bytes.Buffer
	c := fakeServer(t, []Run{})
	if err := c.PrintRuns(context.Background(), &out, false, time.Unix(0, 0)); err != nil || out.String() != "no runs on "+c.Base+"\n" {
		t.Errorf("none: %q, %v", out.String(), err)
	}
	out.Reset()
	c = fakeServer(t, []Run{{Run: store.Run{ID: "r1", Name: "job", State: store.Queued}}})
	if err := c.PrintRuns(context.Background(), &out, false, time.Unix(0, 0)); err != nil || !strings.Contains(out.String(), "RUN ID") || !strings.Contains(out.String(), "r1") {
		t.Errorf("table: %q, %v", out.String(), err)
	}
	out.Reset()
	var runs []Run
	if err := c.PrintRuns(context.Background(), &out, true, time.Unix(0, 0)); err != nil || json.Unmarshal(out.Bytes(), &runs) != nil || len(runs) != 1 {
		t.Errorf("json: %q, %v", out.String(), err)
	}
}

// A queued run's status, drawn once as a table, is where it stands in the queue (no request
// for a status no driver has drawn); as JSON it is the server's.
func TestRenderStatusQueued(t *testing.T) {
	run := Run{Run: store.Run{ID: "r1", Name: "job", Team: "ml", User: "ana", State: store.Queued}}
	c := fakeServer(t, []Run{run})
	out, live, err := c.RenderStatus(context.Background(), run, rundir.StatusOptions{})
	var want bytes.Buffer
	WriteStatus(&want, run)
	if err != nil || live || string(out) != want.String() {
		t.Errorf("queued: %q, live %v, %v", out, live, err)
	}
	if _, _, err := c.RenderStatus(context.Background(), run, rundir.StatusOptions{JSON: true}); err == nil {
		t.Errorf("as JSON: asked the server, which has no status endpoint here: no error")
	}
}
