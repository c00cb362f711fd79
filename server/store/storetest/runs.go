package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Every field of a run comes back as it went in.
func testRunRoundTrip(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	r := run("r1", "vision", 0)
	r.State, r.Priority = store.Running, -3
	r.StartedAt, r.EndedAt = t0().Add(time.Minute), t0().Add(time.Hour)
	r.CostUSD, r.Message, r.CancelRequested = 1.75, "waits for 4 GPUs", true
	must(t, s.CreateRun(ctx(t), r))
	got, err := s.Run(ctx(t), "r1")
	must(t, err)
	r.SubmittedAt, r.StartedAt, r.EndedAt = micro(r.SubmittedAt), micro(r.StartedAt), micro(r.EndedAt)
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("Run =\n%+v\nwant\n%+v", got, r)
	}
	// Zero times stay zero; empty spec and plan come back nil; a zero SubmittedAt is now.
	bare := store.Run{ID: "r2", Team: "vision", State: store.Queued}
	before := time.Now().Add(-time.Second)
	must(t, s.CreateRun(ctx(t), bare))
	got, err = s.Run(ctx(t), "r2")
	must(t, err)
	if got.SubmittedAt.Before(before) || !got.StartedAt.IsZero() || !got.EndedAt.IsZero() || got.Spec != nil || got.Plan != nil {
		t.Fatalf("bare run came back %+v", got)
	}
}

func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

func testRunErrors(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	wantErr(t, s.CreateRun(ctx(t), run("r1", "vision", 1)), store.ErrExists, "create run r1: already exists")
	wantErr(t, s.CreateRun(ctx(t), run("r2", "nope", 1)), store.ErrNotFound, "create run r2")
	_, err := s.Run(ctx(t), "r9")
	wantErr(t, err, store.ErrNotFound, "run r9")
	bad := run("r3", "vision", 0)
	bad.State = "sleeping"
	wantErr(t, s.CreateRun(ctx(t), bad), store.ErrInvalid, "state")
	if rs, err := s.Runs(ctx(t), store.RunFilter{}); err != nil || ids(rs) != "r1" {
		t.Fatalf("failed creates left runs %q, %v", ids(rs), err)
	}
}

// Runs lists oldest submission first, ties by ID, kept by team and state, at most Limit.
func testRunsOrderAndFilters(t *testing.T, open Open) {
	s := withTeams(t, open, "vision", "audio")
	for _, r := range []store.Run{
		run("c", "vision", 5), run("a", "audio", 2), run("b", "vision", 2),
		run("d", "audio", 9), run("e", "vision", 1), run("B", "audio", 2),
	} {
		must(t, s.CreateRun(ctx(t), r))
	}
	for id, st := range map[string]store.RunState{"c": store.Running, "d": store.Finished, "e": store.Failed} {
		_, err := s.UpdateRun(ctx(t), id, func(r *store.Run) error { r.State = st; return nil })
		must(t, err)
	}
	for _, c := range []struct {
		f    store.RunFilter
		want string
	}{
		{store.RunFilter{}, "e,B,a,b,c,d"}, // ties by ID in byte order
		{store.RunFilter{Team: "vision"}, "e,b,c"},
		{store.RunFilter{Team: "audio"}, "B,a,d"},
		{store.RunFilter{Team: "nobody"}, ""},
		{store.RunFilter{States: []store.RunState{store.Queued}}, "B,a,b"},
		{store.RunFilter{States: []store.RunState{store.Running, store.Queued}}, "B,a,b,c"},
		{store.RunFilter{Team: "vision", States: []store.RunState{store.Queued, store.Failed}}, "e,b"},
		{store.RunFilter{Limit: 2}, "e,B"},
		{store.RunFilter{Team: "audio", Limit: 1}, "B"},
		{store.RunFilter{States: []store.RunState{store.Finished, store.Cancelled}, Limit: 5}, "d"},
	} {
		rs, err := s.Runs(ctx(t), c.f)
		must(t, err)
		if got := ids(rs); got != c.want {
			t.Errorf("Runs(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// UpdateRun writes back what fn changed, but never the ID or team, and returns the result.
func testUpdateRun(t *testing.T, open Open) {
	s := withTeams(t, open, "vision", "audio")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	got, err := s.UpdateRun(ctx(t), "r1", func(r *store.Run) error {
		if r.State != store.Queued || string(r.Spec) != "name: r1\n" {
			t.Errorf("fn got %+v", r)
		}
		r.ID, r.Team = "other", "audio"
		r.State, r.StartedAt, r.Message = store.Running, t0().Add(time.Hour), "started"
		r.Plan = []byte(`{"trials":8}`)
		return nil
	})
	must(t, err)
	again, err := s.Run(ctx(t), "r1")
	must(t, err)
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("UpdateRun returned %+v, the store holds %+v", got, again)
	}
	if got.ID != "r1" || got.Team != "vision" || got.State != store.Running || got.Message != "started" ||
		string(got.Plan) != `{"trials":8}` || !got.StartedAt.Equal(t0().Add(time.Hour)) {
		t.Fatalf("after UpdateRun: %+v", got)
	}
	if _, err := s.Run(ctx(t), "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fn's ID change made a run: %v", err)
	}
	called := false
	_, err = s.UpdateRun(ctx(t), "r9", func(*store.Run) error { called = true; return nil })
	wantErr(t, err, store.ErrNotFound, "update run r9")
	if called {
		t.Fatal("fn called for a run that is not there")
	}
}

// An error from fn, or a run fn made invalid, changes nothing.
func testUpdateRunAborts(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	errStop := errors.New("not now")
	_, err := s.UpdateRun(ctx(t), "r1", func(r *store.Run) error { r.State = store.Cancelled; return errStop })
	if err != errStop {
		t.Fatalf("UpdateRun returned %v, want fn's error itself", err)
	}
	_, err = s.UpdateRun(ctx(t), "r1", func(r *store.Run) error {
		r.State, r.Spec = store.Cancelled, make([]byte, store.MaxSpecBytes+1)
		return nil
	})
	wantErr(t, err, store.ErrInvalid, "spec")
	_, err = s.UpdateRun(ctx(t), "r1", func(r *store.Run) error { r.SubmittedAt = time.Time{}; return nil })
	wantErr(t, err, store.ErrInvalid, "submission time")
	r, err := s.Run(ctx(t), "r1")
	must(t, err)
	if r.State != store.Queued || len(r.Spec) > 100 {
		t.Fatalf("an aborted update changed the run: state %s, spec of %d bytes", r.State, len(r.Spec))
	}
}
