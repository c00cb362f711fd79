package server

import (
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func run(id, team string, gpus, nodes int, jct float64, prio int, at time.Duration) store.Run {
	return store.Run{ID: id, Team: team, State: store.Queued, GPUs: gpus, Nodes: nodes, PredictedJCTSeconds: jct, Priority: prio, SubmittedAt: t0.Add(at)}
}

// schedule runs Schedule team by team, as the server does, on running and queued runs.
func schedule(teams map[string]store.Team, running, queued []store.Run, now time.Time) (start []string, predicted map[string]time.Time) {
	predicted = map[string]time.Time{}
	for _, name := range slices.Sorted(maps.Keys(teams)) {
		l := store.Ledger{Team: teams[name]}
		for _, r := range running {
			if r.Team == name {
				r.State = store.Running
				l.Active = append(l.Active, r)
			}
		}
		for _, r := range queued {
			if r.Team == name {
				l.Active = append(l.Active, r)
			}
		}
		v := Schedule(l, now)
		start = append(start, v.Start...)
		maps.Copy(predicted, v.Predicted)
	}
	return start, predicted
}

// Worked by hand: team a may hold 8 GPUs; 4 are held until 12:10. Queued, in order: q1 (4 GPUs,
// fits now), q2 (8: waits for both to end), q3 (2: fits now but the queue is strict).
func TestScheduleStrictQueueAndPredictedStarts(t *testing.T) {
	teams := map[string]store.Team{"a": {Name: "a", MaxGPUs: 8}, "b": {Name: "b"}}
	r0 := run("r0", "a", 4, 1, 600, 0, -time.Hour)
	r0.StartedAt = t0
	queued := []store.Run{
		run("q3", "a", 2, 1, 60, 0, 3*time.Second),
		run("q2", "a", 8, 2, 300, 0, 2*time.Second),
		run("q1", "a", 4, 1, 1200, 0, time.Second),
		run("b1", "b", 64, 8, 10, 0, 0), // no quotas: starts
	}
	start, predicted := schedule(teams, []store.Run{r0}, queued, t0)
	if !slices.Equal(start, []string{"q1", "b1"}) && !slices.Equal(start, []string{"b1", "q1"}) {
		t.Fatalf("started %v", start)
	}
	// q2 needs all 8: r0 ends at 12:10, q1 at 12:20.
	if want := t0.Add(1200 * time.Second); !predicted["q2"].Equal(want) {
		t.Errorf("q2 predicted at %v, want %v", predicted["q2"], want)
	}
	// q3 after q2 has started (strict), alongside it? 8+2 > 8: after q2 ends at 12:25.
	if want := t0.Add(1500 * time.Second); !predicted["q3"].Equal(want) {
		t.Errorf("q3 predicted at %v, want %v", predicted["q3"], want)
	}
}

// Priority first, then submission order.
func TestSchedulePriority(t *testing.T) {
	teams := map[string]store.Team{"a": {Name: "a", MaxGPUs: 4}}
	queued := []store.Run{run("early", "a", 4, 1, 60, 0, 0), run("urgent", "a", 4, 1, 60, 5, time.Minute)}
	start, predicted := schedule(teams, nil, queued, t0)
	if !slices.Equal(start, []string{"urgent"}) || !predicted["early"].Equal(t0.Add(time.Minute)) {
		t.Fatalf("started %v, predicted %v", start, predicted)
	}
}

// Property: whatever the queue, what starts fits each team's quotas alongside what runs, and a
// run started is never behind a run of its team left waiting.
func TestScheduleNeverExceedsQuotas(t *testing.T) {
	for seed := range 300 {
		teams := map[string]store.Team{"a": {Name: "a", MaxGPUs: 16, MaxNodes: 4}, "b": {Name: "b", MaxGPUs: 8}}
		var running, queued []store.Run
		for i := range 3 + seed%7 {
			team := []string{"a", "b"}[(seed+i)%2]
			r := run(fmt.Sprintf("r%d", i), team, 1+(seed*7+i*3)%8, 1+(seed+i)%2, float64(60*(1+i)), (seed+i)%3, time.Duration(i)*time.Second)
			if i%3 == 0 {
				r.StartedAt = t0.Add(-time.Duration(i) * time.Minute)
				running = append(running, r)
			} else {
				queued = append(queued, r)
			}
		}
		start, _ := schedule(teams, running, queued, t0)
		gpus, nodes := map[string]int{}, map[string]int{}
		for _, r := range running {
			gpus[r.Team] += r.GPUs
			nodes[r.Team] += r.Nodes
		}
		for _, id := range start {
			i := slices.IndexFunc(queued, func(r store.Run) bool { return r.ID == id })
			gpus[queued[i].Team] += queued[i].GPUs
			nodes[queued[i].Team] += queued[i].Nodes
		}
		started := map[string]bool{}
		for _, id := range start {
			started[queued[slices.IndexFunc(queued, func(r store.Run) bool { return r.ID == id })].Team] = true
		}
		order := slices.Clone(queued)
		slices.SortStableFunc(order, queueOrder)
		waiting := map[string]bool{}
		for _, r := range order {
			in := slices.Contains(start, r.ID)
			if in && waiting[r.Team] {
				t.Fatalf("seed %d: %s started behind a waiting run of team %s", seed, r.ID, r.Team)
			}
			waiting[r.Team] = waiting[r.Team] || !in
		}
		for name, tm := range teams {
			if started[name] && ((tm.MaxGPUs > 0 && gpus[name] > tm.MaxGPUs) || (tm.MaxNodes > 0 && nodes[name] > tm.MaxNodes)) {
				t.Fatalf("seed %d: team %s holds %d GPUs on %d nodes after starting %v", seed, name, gpus[name], nodes[name], start)
			}
		}
	}
}

// Worked by hand: a $100 month, $30 charged, a running run predicted at $50 of which $20 is
// charged (so $30 more to come): $40 remain, a $45 plan is refused with both figures.
func TestAdmitBudgetAndQuotas(t *testing.T) {
	l := store.Ledger{Team: store.Team{Name: "a", MonthlyBudgetUSD: 100, MaxGPUs: 16}, Spent: 30,
		Active: []store.Run{{State: store.Running, PredictedCostUSD: 50, CostUSD: 20}}}
	err := Admit(l, "alice", Demand{CostUSD: 45, GPUs: 8}, QueueLimits{})
	ref, ok := err.(*Refusal)
	if !ok || ref.Reason != "budget" || ref.PredictedCostUSD != 45 || ref.RemainingBudgetUSD != 40 {
		t.Fatalf("refusal %#v", err)
	}
	if err := Admit(l, "alice", Demand{CostUSD: 40, GPUs: 8}, QueueLimits{}); err != nil {
		t.Fatalf("a $40 plan: %v", err)
	}
	err = Admit(store.Ledger{Team: l.Team}, "alice", Demand{CostUSD: 1, GPUs: 32, Nodes: 4}, QueueLimits{})
	if ref, ok := err.(*Refusal); !ok || ref.Reason != "quota" || ref.MaxGPUs != 16 {
		t.Fatalf("quota refusal %#v", err)
	}
}

// A user's queued runs count against the per-user limit, everyone's against the team's (its
// own MaxQueuedRuns over the server's); running runs against neither.
func TestAdmitQueueLimits(t *testing.T) {
	l := store.Ledger{Team: store.Team{Name: "a"}}
	for i, u := range []string{"alice", "alice", "bob"} {
		r := run(fmt.Sprint(i), "a", 1, 1, 60, 0, 0)
		r.User = u
		l.Active = append(l.Active, r)
	}
	l.Active = append(l.Active, store.Run{ID: "r", User: "bob", State: store.Running})
	err := Admit(l, "alice", Demand{}, QueueLimits{PerTeam: 10, PerUser: 2})
	if ref, ok := err.(*Refusal); !ok || ref.Reason != "queue" || ref.QueuedBy != "alice" || ref.Queued != 2 || ref.MaxQueued != 2 {
		t.Fatalf("alice's third queued run: %#v", err)
	}
	if err := Admit(l, "bob", Demand{}, QueueLimits{PerTeam: 10, PerUser: 2}); err != nil {
		t.Fatalf("bob's second: %v", err)
	}
	l.Team.MaxQueuedRuns = 3
	err = Admit(l, "bob", Demand{}, QueueLimits{PerTeam: 10, PerUser: 2})
	if ref, ok := err.(*Refusal); !ok || ref.Reason != "queue" || ref.QueuedBy != "team a" || ref.MaxQueued != 3 {
		t.Fatalf("the team's fourth queued run: %#v", err)
	}
	if !strings.Contains(err.Error(), "team a has 3 runs queued") {
		t.Errorf("message: %v", err)
	}
}

// A running run holds its GPUs past its predicted end: under max_gpus 1, a queued 1-GPU run
// waits however overdue the running one is (on main it started alongside it).
func TestScheduleOverdueRunStillHolds(t *testing.T) {
	teams := map[string]store.Team{"a": {Name: "a", MaxGPUs: 1}}
	r0 := run("r0", "a", 1, 1, 60, 0, -time.Hour)
	r0.StartedAt = t0.Add(-time.Hour) // predicted to end 59 minutes ago
	start, predicted := schedule(teams, []store.Run{r0}, []store.Run{run("q1", "a", 1, 1, 60, 0, 0)}, t0)
	if len(start) != 0 || !predicted["q1"].After(t0) {
		t.Fatalf("started %v beside an overdue run; predicted %v", start, predicted)
	}
}

// What can no longer fit leaves the queue with the reason, and does not hold it: a run wider
// than a lowered quota, one whose reservation is over what the month has left. One that fits
// the month but not beside the running runs' reservations waits, saying why, and holds the
// runs behind it.
func TestScheduleRefusesWhatNoLongerFits(t *testing.T) {
	team := store.Team{Name: "a", MaxGPUs: 4, MonthlyBudgetUSD: 10}
	running := run("r0", "a", 1, 1, 3600, 0, -time.Hour)
	running.State, running.StartedAt, running.PredictedCostUSD, running.CostUSD = store.Running, t0, 5, 1
	wide := run("wide", "a", 8, 2, 60, 0, 0)
	dear := run("dear", "a", 1, 1, 60, 0, time.Second)
	dear.PredictedCostUSD = 9 // over $10 - $2 charged
	fits := run("fits", "a", 1, 1, 60, 0, 2*time.Second)
	fits.PredictedCostUSD = 3 // $10 - $2 - $4 reserved by r0 = $4 left
	waits := run("waits", "a", 1, 1, 60, 0, 3*time.Second)
	waits.PredictedCostUSD = 2 // $1 left after fits
	behind := run("behind", "a", 1, 1, 60, 0, 4*time.Second)
	behind.PredictedCostUSD = 0.5
	v := Schedule(store.Ledger{Team: team, Spent: 2, Active: []store.Run{running, wide, dear, fits, waits, behind}}, t0)
	if !slices.Equal(v.Start, []string{"fits"}) {
		t.Errorf("started %v, want fits", v.Start)
	}
	if !strings.Contains(v.Refuse["wide"], "8 GPUs on 2 nodes; team a may now hold 4 GPUs") ||
		!strings.Contains(v.Refuse["dear"], "$9.00 is over what is left of team a's budget this month, $8.00") || len(v.Refuse) != 2 {
		t.Errorf("refused %v", v.Refuse)
	}
	if !strings.Contains(v.Wait["waits"], "waits for the budget: its predicted cost $2.00") || len(v.Wait) != 1 {
		t.Errorf("waiting %v", v.Wait)
	}
	if _, ok := v.Predicted["behind"]; ok || slices.Contains(v.Start, "behind") {
		t.Errorf("a run behind one waiting for the budget: started %v, predicted %v", v.Start, v.Predicted)
	}
}

func TestTokens(t *testing.T) {
	a, ha, err := NewToken(cryptoRand())
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := NewToken(cryptoRand())
	if a == b || len(a) < 40 || string(HashToken(a)) != string(ha) || string(HashToken(b)) == string(ha) {
		t.Fatalf("tokens %q %q", a, b)
	}
}

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{"ml-team": true, "a.b_c": true, "": false, "../x": false, "-x": false, "a/b": false, "ä": false} {
		if validName(name) != ok {
			t.Errorf("validName(%q) = %v", name, !ok)
		}
	}
}

func cryptoRand() io.Reader { return rand.Reader }

// A paused run gave its nodes back but may be resumed: it holds no GPUs, so a queued run starts
// beside it under max_gpus 1, yet it keeps its reservation, so a run the month could afford only
// without it waits.
func TestSchedulePausedRunKeepsItsReservationNotItsGPUs(t *testing.T) {
	team := store.Team{Name: "a", MaxGPUs: 1, MonthlyBudgetUSD: 10}
	paused := run("p0", "a", 1, 1, 3600, 0, -time.Hour)
	paused.State, paused.StartedAt, paused.PredictedCostUSD, paused.CostUSD = store.Paused, t0.Add(-time.Minute), 6, 1
	cheap := run("cheap", "a", 1, 1, 60, 0, 0)
	cheap.PredictedCostUSD = 4 // $10 - $1 charged - $5 reserved by p0 = $4 left
	v := Schedule(store.Ledger{Team: team, Spent: 1, Active: []store.Run{paused, cheap}}, t0)
	if !slices.Equal(v.Start, []string{"cheap"}) {
		t.Fatalf("started %v beside a paused run, want cheap (wait: %v)", v.Start, v.Wait)
	}
	dear := run("dear", "a", 1, 1, 60, 0, 0)
	dear.PredictedCostUSD = 4.5 // fits $9 left without p0's reservation, not $4 with it
	v = Schedule(store.Ledger{Team: team, Spent: 1, Active: []store.Run{paused, dear}}, t0)
	if len(v.Start) != 0 {
		t.Fatalf("started %v: the paused run's reservation was not counted", v.Start)
	}
}
