package storetest

import (
	"math"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// The store refuses, with ErrInvalid and before writing anything, what would let a caller grow
// it without bound or what one of its databases could not hold as given.
func testBounds(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	atBound := run("big", "vision", 0)
	atBound.Spec = []byte(strings.Repeat("x", store.MaxSpecBytes))
	must(t, s.CreateRun(ctx(t), atBound))
	got, err := s.Run(ctx(t), "big")
	must(t, err)
	if len(got.Spec) != store.MaxSpecBytes {
		t.Fatalf("a spec at the bound came back %d bytes", len(got.Spec))
	}
	for name, c := range map[string]struct {
		change func(*store.Run)
		says   string
	}{
		"spec":     {func(r *store.Run) { r.Spec = make([]byte, store.MaxSpecBytes+1) }, "spec is 1048577 bytes"},
		"plan":     {func(r *store.Run) { r.Plan = make([]byte, store.MaxPlanBytes+1) }, "plan is 16777217 bytes"},
		"id":       {func(r *store.Run) { r.ID = strings.Repeat("r", store.MaxNameBytes+1) }, "run ID"},
		"empty id": {func(r *store.Run) { r.ID = "" }, "empty run ID"},
		"message":  {func(r *store.Run) { r.Message = strings.Repeat("m", store.MaxTextBytes+1) }, "message"},
		"nul":      {func(r *store.Run) { r.Message = "a\x00b" }, "NUL"},
		"utf8":     {func(r *store.Run) { r.Name = "\xff\xfe" }, "UTF-8"},
		"nan":      {func(r *store.Run) { r.PredictedCostUSD = math.NaN() }, "predicted cost"},
		"inf":      {func(r *store.Run) { r.CostUSD = math.Inf(1) }, "cost"},
		"gpus":     {func(r *store.Run) { r.GPUs = -1 }, "GPUs"},
	} {
		r := run("r-"+name, "vision", 1)
		c.change(&r)
		wantErr(t, s.CreateRun(ctx(t), r), store.ErrInvalid, c.says)
	}
	rs, err := s.Runs(ctx(t), store.RunFilter{})
	must(t, err)
	if ids(rs) != "big" {
		t.Fatalf("refused runs were stored: %s", ids(rs))
	}
	_, err = s.ChargeRun(ctx(t), "big", math.NaN(), "2026-11")
	wantErr(t, err, store.ErrInvalid, "cost so far")
	u := user("alice", "vision")
	u.TokenHash = make([]byte, 65)
	wantErr(t, s.CreateUser(ctx(t), u), store.ErrInvalid, "token hash")
	_, err = s.AcquireLease(ctx(t), strings.Repeat("l", store.MaxNameBytes+1), "a", 1, t0())
	wantErr(t, err, store.ErrInvalid, "lease name")
}
