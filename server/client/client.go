package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// Client is one server and the token it is spoken to with.
type Client struct {
	// Base is the server's URL (https://rubberband.example:8443).
	Base  string
	Token string
	HTTP  *http.Client
}

// New returns a client of the server at base.
func New(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: not an http:// or https:// URL", base)
	}
	if token == "" {
		return nil, errors.New("no token: set RUBBERBAND_TOKEN (or --token) to the one `rubberband server users add` printed")
	}
	return &Client{Base: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{Timeout: 0, CheckRedirect: KeepTokenHome}}, nil
}

// KeepTokenHome is New's http.Client.CheckRedirect: a redirect to another origin (scheme, host or
// port) goes without the token. net/http drops it only for another host name, and keeps it for
// another port of the same host, for a subdomain and from https to http.
func KeepTokenHome(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		req.Header.Del("Authorization")
	}
	return nil
}

// Error is an error the server answered with: its HTTP status and message, and for a refused
// submission the figures.
type Error struct {
	Status  int
	Message string
	Refusal *server.Refusal
	// Problems are a spec's problems, each naming its field and line.
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) > 0 {
		return e.Message + ":\n  " + strings.Join(e.Problems, "\n  ")
	}
	return e.Message
}

// Run is a run as the server shows it.
type Run struct {
	store.Run
	PredictedStart time.Time `json:"predicted_start,omitzero"`
}

// Submit sends a spec (its text, and the files it names) and returns the queued run and its plan.
func (c *Client) Submit(ctx context.Context, sub server.Submission) (Run, *planner.Report, error) {
	var out struct {
		Run  Run             `json:"run"`
		Plan *planner.Report `json:"plan"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/runs", sub, &out)
	return out.Run, out.Plan, err
}

// Runs lists the runs the token's user may see, in the given states (all when none).
func (c *Client) Runs(ctx context.Context, states ...store.RunState) ([]Run, error) {
	q := url.Values{}
	for _, s := range states {
		q.Add("state", string(s))
	}
	var out []Run
	err := c.do(ctx, http.MethodGet, "/api/v1/runs?"+q.Encode(), nil, &out)
	return out, err
}

// Run is one run.
func (c *Client) Run(ctx context.Context, id string) (Run, error) {
	var out Run
	err := c.do(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Cancel cancels a run.
func (c *Client) Cancel(ctx context.Context, id string) (Run, error) {
	var out Run
	err := c.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/cancel", nil, &out)
	return out, err
}

// Resume queues a paused run again (an infrastructure fault paused it): its driver carries on
// from its journal once its team's queue lets it start. A run that is not paused is a 409 *Error.
func (c *Client) Resume(ctx context.Context, id string) (Run, error) {
	var out Run
	err := c.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/resume", nil, &out)
	return out, err
}

// Get decodes what the run's endpoint (report, trials, best) answers into v.
func (c *Client) Get(ctx context.Context, id, what string, v any) error {
	return c.do(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id)+"/"+what, nil, v)
}

// Audit is the audit log the token's user may read (their team's; an admin's, everyone's),
// newest first.
func (c *Client) Audit(ctx context.Context) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	err := c.do(ctx, http.MethodGet, "/api/v1/audit", nil, &out)
	return out, err
}

// Logs copies the run's driver log, or a trial's, to w; from its last tail lines when tail is
// 0 or more; with follow, until the run ends.
func (c *Client) Logs(ctx context.Context, id, trial string, tail int, follow bool, w io.Writer) error {
	q := url.Values{}
	if trial != "" {
		q.Set("trial", trial)
	}
	if tail >= 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	if follow {
		q.Set("follow", "1")
	}
	return c.Copy(ctx, id, "logs", q, w)
}

// Copy copies to w what the server answers for one of the run's endpoints (what: "logs",
// "status", "report"...) with the query q: text a command prints as it is.
func (c *Client) Copy(ctx context.Context, id, what string, q url.Values, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id)+"/"+what+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Wait follows the run's events until it ends, and returns it.
func (c *Client) Wait(ctx context.Context, id string) (Run, error) {
	if err := c.Events(ctx, id, func(journal.Event) bool { return true }); err != nil {
		return Run{}, err
	}
	return c.Run(ctx, id)
}

// Events calls fn with each record of the run's journal as the server streams it (from the
// run's start), until the run ends, fn returns false, or ctx ends.
func (c *Client) Events(ctx context.Context, id string, fn func(journal.Event) bool) error {
	resp, err := c.send(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	kind := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			kind = ""
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && kind == "end":
			return nil
		case strings.HasPrefix(line, "data: ") && kind == "error":
			return fmt.Errorf("run %s: events: %s", id, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "data: "):
			var e journal.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				return fmt.Errorf("run %s: events: %w", id, err)
			}
			if !fn(e) {
				return nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("run %s: events: %w", id, err)
	}
	return ctx.Err()
}

// do sends in (JSON, when not nil) and decodes the answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return nil
}

// send sends a request with the token and turns an error status into an *Error.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	contentType := ""
	if body != nil {
		contentType = "application/json"
	}
	return c.sendRequest(req, contentType)
}

// sendRequest is send of a request made by the caller, with its body's content type.
func (c *Client) sendRequest(req *http.Request, contentType string) (*http.Response, error) {
	method, path := req.Method, req.URL.Path
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", c.Base, err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Error    string          `json:"error"`
		Refusal  *server.Refusal `json:"refusal"`
		Problems []string        `json:"problems"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil, &Error{Status: resp.StatusCode, Message: e.Error, Refusal: e.Refusal, Problems: e.Problems}
}
