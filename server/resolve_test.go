package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// A RUN argument against a server is what it is on this machine: an ID, a name, or an ID's
// start; among the caller's team's runs only (another team's name is no run of theirs), a name
// two runs have refused with both IDs, newest first. On main only IDs were found.
func TestLookupByIDNameOrStart(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for i, r := range []store.Run{
		{ID: "r20261128-090000-aaaa1111", Team: "ml", User: "alice", Name: "digits"},
		{ID: "r20261128-090100-bbbb2222", Team: "ml", User: "alice", Name: "twin"},
		{ID: "r20261128-090200-cccc3333", Team: "ml", User: "alice", Name: "twin"},
		{ID: "r20261128-090300-dddd4444", Team: "cv", User: "carol", Name: "secret"},
	} {
		r.State, r.SubmittedAt, r.Spec, r.Plan = store.Finished, at.Add(time.Duration(i)*time.Minute), []byte("x"), []byte("{}")
		if err := a.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	alice := store.User{Name: "alice", Team: "ml"}
	for arg, want := range map[string]string{
		"r20261128-090000-aaaa1111": "r20261128-090000-aaaa1111",
		"digits":                    "r20261128-090000-aaaa1111",
		"r20261128-0902":            "r20261128-090200-cccc3333",
		"r20261128-090300-dddd4444": "r20261128-090300-dddd4444", // by ID, any team's: the API answers 404 (mayAccess)
	} {
		if got, err := server.Lookup(ctx, a.st, alice, arg); err != nil || got.ID != want {
			t.Errorf("%s: %s, %v; want %s", arg, got.ID, err, want)
		}
	}
	if _, err := server.Lookup(ctx, a.st, alice, "secret"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another team's name: %v", err)
	}
	if _, err := server.Lookup(ctx, a.st, store.User{Name: "root", Team: "cv", Admin: true}, "twin"); err == nil {
		t.Error("an admin's twin found one run")
	}
	_, err := server.Lookup(ctx, a.st, alice, "twin")
	if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"twin" names 2 runs: r20261128-090200-cccc3333 (finished, 2026-11-28 09:02), r20261128-090100-bbbb2222 (finished, 2026-11-28 09:01); give its ID`) {
		t.Errorf("twin: %v", err)
	}
	// Through the API: 409 with the IDs, and the run by its name.
	if code, body := a.do("alice", "GET", "/api/v1/runs/twin", nil); code != 409 || !strings.Contains(body, "r20261128-090100-bbbb2222") {
		t.Errorf("GET twin: %d %s", code, body)
	}
	if code, body := a.do("alice", "GET", "/api/v1/runs/digits", nil); code != 200 || !strings.Contains(body, "r20261128-090000-aaaa1111") {
		t.Errorf("GET digits: %d %s", code, body)
	}
	if code, _ := a.do("alice", "GET", "/api/v1/runs/secret", nil); code != 404 {
		t.Errorf("GET another team's name: %d", code)
	}
}
