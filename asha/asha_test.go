package asha

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// drain runs the ladder on one slot: each job reports loss(trial, rung) at once.
func drain(t *testing.T, l *Ladder, loss func(trial, rung int) float64) []Job {
	t.Helper()
	var jobs []Job
	for {
		j, ok := l.Next()
		if !ok {
			break
		}
		jobs = append(jobs, j)
		if err := l.Report(j.Trial, loss(j.Trial, j.Rung)); err != nil {
			t.Fatal(err)
		}
	}
	if !l.Done() {
		t.Fatal("no job left, yet not done")
	}
	return jobs
}

// With eta above the trials no rung ever holds eta results: the rule promotes nothing, and only
// once all five have reported does the best go on, alone, rung by rung to max_iters (finish).
// With eta equal to them, the rule promotes the best once the last has reported, never before;
// finish then takes it from rung 1 to the last.
func TestEtaAtTheTrialCount(t *testing.T) {
	loss := func(trial, rung int) float64 { return float64((trial * 7) % 5) } // t0 is best
	var got []string
	for _, j := range drain(t, New(spec.ASHA{Trials: 5, MinIters: 1, MaxIters: 36, Eta: 6, Brackets: 1}), loss) {
		got = append(got, jobName(j))
	}
	if want := []string{"t0", "t1", "t2", "t3", "t4", "t0>1", "t0>2"}; !slices.Equal(got, want) {
		t.Fatalf("eta 6 over 5 trials: %v, want %v", got, want)
	}
	jobs := drain(t, New(spec.ASHA{Trials: 5, MinIters: 1, MaxIters: 25, Eta: 5, Brackets: 1}), loss)
	if len(jobs) != 7 || jobs[5].Trial != 0 || jobs[5].Rung != 1 || jobs[5].From != 1 || jobs[5].To != 5 || jobs[6].To != 25 {
		t.Fatalf("jobs %+v", jobs)
	}
}

// On one slot with known losses the promotion sequence is the paper's rule worked by hand.
// Nine trials, eta 3, rungs at 1, 3, 9 iterations; losses at rung 0 are 5 3 8 1 9 2 7 6 4.
func TestOneSlotByHand(t *testing.T) {
	at0 := []float64{5, 3, 8, 1, 9, 2, 7, 6, 4}
	loss := func(trial, rung int) float64 { return at0[trial] + 10*float64(rung) - float64(trial)/100 }
	l := New(spec.ASHA{Trials: 9, MinIters: 1, MaxIters: 9, Eta: 3, Brackets: 1})
	var got []string
	for _, j := range drain(t, l, loss) {
		got = append(got, jobName(j))
	}
	// t0 t1 t2: rung 0 holds 5 3 8 -> top 1 is t1 (3): promote. t3 (1): n=4, top 1 is t3, not
	// promoted yet -> promote. t4 (9): n=5, top 1 = t3, done. t5 (2): n=6, top 2 = t3 t5 -> t5.
	// Rung 1 now holds t1 t3 t5 (n=3): its top is t3 (11 - .03) -> to rung 2.
	// t6, t7: n=8, top 2 = t3 t5: nothing. t8 (4): n=9, top 3 = t3 t5 t1: all promoted. End.
	want := []string{"t0", "t1", "t2", "t1>1", "t3", "t3>1", "t4", "t5", "t5>1", "t3>2", "t6", "t7", "t8"}
	if !slices.Equal(got, want) {
		t.Fatalf("jobs\n%v\nwant\n%v", got, want)
	}
	if trial, _, _ := l.Best(); trial != 3 {
		t.Fatalf("best trial %d, want 3", trial)
	}
}

func jobName(j Job) string {
	if j.New {
		return "t" + itoa(j.Trial)
	}
	return "t" + itoa(j.Trial) + ">" + itoa(j.Rung)
}

func itoa(i int) string { return string(rune('0' + i)) }

// A trial that was not in the top third when it reported is promoted later, once enough worse
// results arrive; equal losses rank by who reported first.
func TestLatePromotionsAndTies(t *testing.T) {
	l := New(spec.ASHA{Trials: 6, MinIters: 1, MaxIters: 3, Eta: 3, Brackets: 1})
	jobs := map[int]Job{}
	for range 3 {
		j, _ := l.Next()
		jobs[j.Trial] = j
	}
	l.Report(0, 1) // t0 best so far
	l.Report(1, 2)
	l.Report(2, 1) // ties t0, reported later
	if j, ok := l.Next(); !ok || j.New || j.Trial != 0 {
		t.Fatalf("the tie went to %+v, not t0 (reported first)", j)
	}
	l.Report(0, 0.5) // t0 at the last rung
	for range 3 {
		l.Next() // t3, t4, t5
	}
	l.Report(3, 5)
	l.Report(4, 6)
	l.Report(5, 7) // n = 6: top 2 = t0, t2 -> t2 promoted late
	if j, ok := l.Next(); !ok || j.Trial != 2 || j.Rung != 1 {
		t.Fatalf("late promotion: %+v %v", j, ok)
	}
	if l.Promotions(0, 0) != 2 || l.Results(0, 0) != 6 {
		t.Fatalf("promotions %d of %d", l.Promotions(0, 0), l.Results(0, 0))
	}
	if err := l.Report(4, 1); err == nil {
		t.Fatal("a trial with no job in flight reported")
	}
}

// Brackets: trial i goes to bracket i mod B, whose first rung is min_iters·eta^b.
func TestBrackets(t *testing.T) {
	cfg := spec.ASHA{Trials: 7, MinIters: 1, MaxIters: 9, Eta: 3, Brackets: 3}
	l := New(cfg)
	if !slices.Equal(l.Rungs(0), []int{1, 3, 9}) || !slices.Equal(l.Rungs(1), []int{3, 9}) || !slices.Equal(l.Rungs(2), []int{9}) {
		t.Fatalf("rungs %v %v %v", l.Rungs(0), l.Rungs(1), l.Rungs(2))
	}
	for i := range 7 {
		j, _ := l.Next()
		if j.Bracket != i%3 || j.To != l.Rungs(i % 3)[0] {
			t.Fatalf("trial %d: %+v", i, j)
		}
	}
	if cfg.BracketTrials(0) != 3 || cfg.BracketTrials(1) != 2 || cfg.BracketTrials(2) != 2 {
		t.Fatal("bracket trials")
	}
}

// Against a brute-force reading of the rule, under random losses and random orders of
// completion on several slots: every decision agrees, and at the end each rung has promoted at
// least floor(n/eta) of its n results (ASHA never promotes fewer than synchronous SHA).
func TestAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		cfg := spec.ASHA{Trials: 1 + r.IntN(60), MinIters: 1, MaxIters: 27, Eta: 2 + r.IntN(3), Brackets: 1 + r.IntN(2)}
		cfg.Brackets = min(cfg.Brackets, cfg.MaxBrackets())
		ref := newBrute(cfg)
		l := againstBrute(t, round, New(cfg), ref, r, 1+r.IntN(8), func(l *Ladder, j Job) *Ladder {
			loss := float64(r.IntN(20)) // ties happen
			l.Report(j.Trial, loss)
			ref.report(j, loss)
			return l
		})
		if !l.Done() {
			t.Fatalf("round %d: not done", round)
		}
		for b := range cfg.Brackets {
			if last := len(l.Rungs(b)) - 1; cfg.BracketTrials(b) > 0 && l.Results(b, last) == 0 {
				t.Fatalf("round %d: bracket %d ended with its last rung empty", round, b)
			}
		}
		for b := range cfg.Brackets {
			for k := range len(l.Rungs(b)) - 1 {
				if n := l.Results(b, k); l.Promotions(b, k) < n/cfg.Eta {
					t.Fatalf("round %d: rung %d of bracket %d promoted %d of %d", round, k, b, l.Promotions(b, k), n)
				}
			}
		}
	}
}

// againstBrute runs l and the brute force ref side by side on slots slots, the jobs ending in
// a random order: every decision must agree. report takes a job's result (to both) and returns
// the ladder to go on with.
func againstBrute(t *testing.T, round int, l *Ladder, ref *brute, r *rand.Rand, slots int, report func(*Ladder, Job) *Ladder) *Ladder {
	t.Helper()
	var running []Job
	for {
		for len(running) < slots {
			j, ok := l.Next()
			want, wok := ref.next()
			if ok != wok || (ok && j != want) {
				t.Fatalf("round %d: next %+v %v, brute force %+v %v", round, j, ok, want, wok)
			}
			if !ok {
				break
			}
			running = append(running, j)
		}
		if len(running) == 0 {
			return l
		}
		i := r.IntN(len(running))
		j := running[i]
		running = slices.Delete(running, i, i+1)
		l = report(l, j)
	}
}

// brute is the rule read literally: sort the rung, take its top floor(n/eta), promote the first
// not yet promoted.
type brute struct {
	cfg      spec.ASHA
	results  map[[2]int][]result // (bracket, rung)
	promoted map[[3]int]bool     // (bracket, rung, trial)
	started  int
	order    int
	inFlight int
	points   map[int]pareto.Point // by order: a multi-objective ladder's results (reportPoint)
}

func newBrute(cfg spec.ASHA) *brute {
	return &brute{cfg: cfg, results: map[[2]int][]result{}, promoted: map[[3]int]bool{}}
}

func (b *brute) next() (Job, bool) {
	best, found := Job{}, false
	for br := range b.cfg.Brackets {
		rungs := b.cfg.Rungs(br)
		for k := len(rungs) - 2; k >= 0; k-- {
			rs := b.sorted(br, k)
			var pick *result
			for i := range len(rs) / b.cfg.Eta {
				if !b.promoted[[3]int{br, k, rs[i].trial}] {
					pick = &rs[i]
					break
				}
			}
			if pick != nil {
				if !found || k+1 > best.Rung {
					best, found = Job{Trial: pick.trial, Bracket: br, Rung: k + 1, From: rungs[k], To: rungs[k+1]}, true
				}
				break
			}
		}
	}
	if !found && b.started >= b.cfg.Trials && b.inFlight == 0 {
		// finish: a bracket with nothing at its last rung trains the best of its highest rung on.
		for br := range b.cfg.Brackets {
			rungs := b.cfg.Rungs(br)
			if len(b.results[[2]int{br, len(rungs) - 1}]) > 0 {
				continue
			}
			for k := len(rungs) - 2; k >= 0 && !found; k-- {
				rs := b.sorted(br, k)
				if len(rs) == 0 {
					continue
				}
				for _, r := range rs {
					if !b.promoted[[3]int{br, k, r.trial}] {
						best, found = Job{Trial: r.trial, Bracket: br, Rung: k + 1, From: rungs[k], To: rungs[k+1]}, true
						break
					}
				}
				break
			}
			if found {
				break
			}
		}
	}
	if found {
		b.promoted[[3]int{best.Bracket, best.Rung - 1, best.Trial}] = true
		b.inFlight++
		return best, true
	}
	if b.started >= b.cfg.Trials {
		return Job{}, false
	}
	t := b.started
	b.started++
	b.inFlight++
	br := t % b.cfg.Brackets
	return Job{Trial: t, Bracket: br, Rung: 0, To: b.cfg.Rungs(br)[0], New: true}, true
}

// sorted is rung k of bracket br's results, best first: by loss, or by pareto.Order of their
// points (ties: reported first).
func (b *brute) sorted(br, k int) []result {
	rs := slices.Clone(b.results[[2]int{br, k}])
	if b.points == nil {
		slices.SortFunc(rs, less)
		return rs
	}
	points := make([]pareto.Point, len(rs)) // rs are in the order reported
	for i, r := range rs {
		points[i] = b.points[r.order]
	}
	out := make([]result, 0, len(rs))
	for _, i := range pareto.Order(points) {
		out = append(out, rs[i])
	}
	return out
}

func (b *brute) reportPoint(j Job, p pareto.Point) {
	if b.points == nil {
		b.points = map[int]pareto.Point{}
	}
	b.points[b.order] = p
	b.report(j, 0)
}

func (b *brute) report(j Job, loss float64) {
	b.inFlight--
	key := [2]int{j.Bracket, j.Rung}
	b.results[key] = append(b.results[key], result{loss: loss, order: b.order, trial: j.Trial})
	b.order++
}

// Peek says what Next would hand out and changes nothing; Take hands out only what the rule
// allows now (a journal of another spec is refused), and a refused Take changes nothing.
func TestPeekAndTake(t *testing.T) {
	cfg := spec.ASHA{Trials: 4, MinIters: 1, MaxIters: 9, Eta: 3, Brackets: 1}
	l := New(cfg)
	for i := range 4 {
		j, ok := l.Peek()
		if again, _ := l.Peek(); !ok || again != j || j.Trial != i || !j.New {
			t.Fatalf("peek %d: %+v %v, again %+v", i, j, ok, again)
		}
		if err := l.Take(Job{Trial: i + 1, Rung: 0}); err == nil {
			t.Fatalf("took trial %d before trial %d", i+1, i)
		}
		if err := l.Take(j); err != nil {
			t.Fatal(err)
		}
		if err := l.Take(j); err == nil {
			t.Fatal("took a job twice")
		}
	}
	if _, ok := l.Peek(); ok {
		t.Fatal("a job with every trial started and none reported")
	}
	for i, loss := range []float64{3, 1, 2} {
		if err := l.Report(i, loss); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Take(Job{Trial: 0, Rung: 1}); err != nil { // allowed: it reported at rung 0
		t.Fatal(err)
	}
	if err := l.Take(Job{Trial: 3, Rung: 1}); err == nil {
		t.Fatal("promoted a trial with no result")
	}
	if err := l.Take(Job{Trial: 1, Rung: 5}); err == nil {
		t.Fatal("took a rung the ladder does not have")
	}
	if got := l.Jobs(); len(got) != 2 || got[0].Trial != 0 || got[0].From != 1 || got[0].To != 3 || got[1].Trial != 3 {
		t.Fatalf("jobs in flight %+v", got)
	}
}

// A redrawn ladder decides as the original does: at the point it is redrawn (the next job, the
// promotable count, the best trial of a single bracket) and from there on, when what is reported later ranks the
// same against both (here: better or worse than every loss so far, in both).
func TestRedrawnKeepsTheDecisions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		cfg := spec.ASHA{Trials: 1 + r.IntN(50), MinIters: 1, MaxIters: 27, Eta: 2 + r.IntN(3), Brackets: 1 + r.IntN(2)}
		cfg.Brackets = min(cfg.Brackets, cfg.MaxBrackets())
		l := New(cfg)
		slots := 1 + r.IntN(6)
		var running []Job
		step := func(l *Ladder, loss float64) {
			i := r.IntN(len(running))
			j := running[i]
			running = slices.Delete(running, i, i+1)
			if r.IntN(10) == 0 {
				l.Drop(j.Trial)
			} else if err := l.Report(j.Trial, loss); err != nil {
				t.Fatal(err)
			}
		}
		fill := func(l *Ladder) {
			for len(running) < slots {
				j, ok := l.Next()
				if !ok {
					return
				}
				running = append(running, j)
			}
		}
		stop := r.IntN(3 * cfg.Trials)
		for range stop {
			fill(l)
			if len(running) == 0 {
				break
			}
			step(l, r.Float64())
		}
		c := l.Redrawn(func(_, _, n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = 10 + r.Float64()
			}
			slices.Sort(v)
			return v
		})
		same := func(when string) {
			jl, okl := l.Peek()
			jc, okc := c.Peek()
			tl, _, bl := l.Best()
			tc, _, bc := c.Best()
			if cfg.Brackets > 1 { // brackets' rungs are redrawn apart: the best across them is not kept
				tc = tl
			}
			if jl != jc || okl != okc || l.Promotable() != c.Promotable() || tl != tc || bl != bc || l.Done() != c.Done() || l.InFlight() != c.InFlight() {
				t.Fatalf("round %d %s: next %+v %v promotable %d best %d; redrawn %+v %v %d %d", round, when, jl, okl, l.Promotable(), tl, jc, okc, c.Promotable(), tc)
			}
		}
		same("when redrawn")
		// On together: each later loss below or above every loss either ladder holds.
		for k := 0; ; k++ {
			before := slices.Clone(running)
			fill(l)
			got := running[len(before):]
			running = before
			fill(c)
			if !slices.Equal(got, running[len(before):]) {
				t.Fatalf("round %d, step %d after the redraw: the ladder hands out %+v, the redrawn one %+v", round, k, got, running[len(before):])
			}
			if len(running) == 0 {
				break
			}
			i := r.IntN(len(running))
			j := running[i]
			running = slices.Delete(running, i, i+1)
			loss := float64(k) - 1e6
			if r.IntN(2) == 0 {
				loss = 1e6 + float64(k)
			}
			if err := l.Report(j.Trial, loss); err != nil {
				t.Fatal(err)
			}
			if err := c.Report(j.Trial, loss); err != nil {
				t.Fatal(err)
			}
			same("after")
		}
		if !l.Done() || !c.Done() {
			t.Fatalf("round %d: not done after the last job", round)
		}
	}
}

// A clone goes on as the ladder would, with the same losses (its Best too), and apart from it:
// what the clone hands out and is told leaves the ladder as it was.
func TestCloneGoesOnApart(t *testing.T) {
	cfg := spec.ASHA{Trials: 30, MinIters: 1, MaxIters: 27, Eta: 3, Brackets: 2}
	l := New(cfg)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 25; i++ {
		j, ok := l.Next()
		if !ok {
			break
		}
		if err := l.Report(j.Trial, r.Float64()); err != nil {
			t.Fatal(err)
		}
	}
	c := l.Clone()
	bt, bl, _ := l.Best()
	ct, cl, _ := c.Best()
	if bt != ct || bl != cl || c.Started() != l.Started() || c.Promotable() != l.Promotable() {
		t.Fatalf("clone best %d %v, started %d; ladder %d %v, %d", ct, cl, c.Started(), bt, bl, l.Started())
	}
	started, peek := l.Started(), func(l *Ladder) Job { j, _ := l.Peek(); return j }
	want := peek(l)
	for {
		j, ok := c.Next()
		if !ok {
			break
		}
		if err := c.Report(j.Trial, r.Float64()); err != nil {
			t.Fatal(err)
		}
	}
	if l.Started() != started || peek(l) != want || !c.Done() || l.Done() {
		t.Fatalf("the ladder changed with its clone: started %d (was %d), next %+v (was %+v)", l.Started(), started, peek(l), want)
	}
}

// The blocked sorted list ranks and orders as one sorted slice does, across many block splits
// (ties in loss broken by order).
func TestSortedAgainstASlice(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s sorted
	var plain []result
	for i := range 2000 {
		x := result{loss: float64(r.IntN(300)), order: i, trial: i}
		probe := result{loss: float64(r.IntN(300)), order: r.IntN(2000)}
		want, _ := slices.BinarySearchFunc(plain, probe, less)
		if got := s.rank(probe); got != want {
			t.Fatalf("after %d: rank %d, a sorted slice's %d", i, got, want)
		}
		s.insert(x)
		j, _ := slices.BinarySearchFunc(plain, x, less)
		plain = slices.Insert(plain, j, x)
	}
	if !slices.Equal(s.all(), plain) || s.len() != len(plain) || s.first() != plain[0] || len(s.blocks) < 2000/(2*sortedBlock) {
		t.Fatalf("%d results in %d blocks: not the sorted slice's", s.len(), len(s.blocks))
	}
}

// A ladder of thousands of trials (its promoted results over many blocks, jobs in flight)
// saved and restored is the same ladder, laid out alike, and decides alike from there.
func TestSaveRestoreLargeLadder(t *testing.T) {
	cfg := spec.ASHA{Trials: 3000, MinIters: 1, MaxIters: 81, Eta: 3}
	l := New(cfg)
	r := rand.New(rand.NewPCG(5, 6))
	var running []int
	for range 4000 {
		for len(running) < 16 {
			j, ok := l.Next()
			if !ok {
				break
			}
			running = append(running, j.Trial)
		}
		k := r.IntN(len(running))
		l.Report(running[k], r.Float64())
		running = slices.Delete(running, k, k+1)
	}
	if l.Promotions(0, 0) <= 2*sortedBlock {
		t.Fatalf("only %d promoted at rung 0: one block", l.Promotions(0, 0))
	}
	back, ok := Restore(cfg, l.Save())
	if !ok || !reflect.DeepEqual(back, l) {
		t.Fatalf("restored %v: not the ladder saved", ok)
	}
	for range 50 {
		a, okA := l.Next()
		b, okB := back.Next()
		if a != b || okA != okB {
			t.Fatalf("the ladder hands out %+v, the restored one %+v", a, b)
		}
		l.Report(a.Trial, 0.5)
		back.Report(b.Trial, 0.5)
	}
}

// With several objectives and constraints (ReportPoint), the ladder hands out what the rule read
// literally does with each rung sorted by pareto.Order (feasible first, then front, then
// crowding; ties reported first), on random two-objective results with ties and violations,
// and a ladder saved and restored at random points goes on deciding the same.
func TestMultiObjectiveAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 150 {
		cfg := spec.ASHA{Trials: 1 + r.IntN(40), MinIters: 1, MaxIters: 27, Eta: 2 + r.IntN(3), Brackets: 1 + r.IntN(2)}
		cfg.Brackets = min(cfg.Brackets, cfg.MaxBrackets())
		ref := newBrute(cfg)
		l := againstBrute(t, round, New(cfg), ref, r, 1+r.IntN(6), func(l *Ladder, j Job) *Ladder {
			p := pareto.Point{Losses: []float64{float64(r.IntN(6)), float64(r.IntN(6))}} // ties happen
			if r.IntN(5) == 0 {
				p.Violation = float64(1 + r.IntN(3))
			}
			if err := l.ReportPoint(j.Trial, p); err != nil {
				t.Fatal(err)
			}
			ref.reportPoint(j, p)
			if r.IntN(10) == 0 {
				back, ok := Restore(cfg, l.Save())
				if !ok {
					t.Fatalf("round %d: restore refused its own save", round)
				}
				return back
			}
			return l
		})
		if !l.Done() {
			t.Fatalf("round %d: not done", round)
		}
	}
	l := New(spec.ASHA{Trials: 2, MinIters: 1, MaxIters: 3, Eta: 2, Brackets: 1})
	a, _ := l.Next()
	b, _ := l.Next()
	l.ReportPoint(a.Trial, pareto.Point{Losses: []float64{1, 2}})
	if err := l.Report(b.Trial, 1); err == nil {
		t.Error("a loss among points was taken")
	}
}

// BenchmarkMultiObjectiveLadder3k runs a ladder of 3,000 trials on two objectives to its end,
// one slot: every result re-ranks its rung (ReportPoint), the cost of several objectives in ASHA.
func BenchmarkMultiObjectiveLadder3k(b *testing.B) {
	cfg := spec.ASHA{Trials: 3_000, MinIters: 1, MaxIters: 81, Eta: 3, Brackets: 1}
	for b.Loop() {
		r := rand.New(rand.NewPCG(1, 2))
		l := New(cfg)
		for {
			j, ok := l.Next()
			if !ok {
				break
			}
			x := r.Float64()
			l.ReportPoint(j.Trial, pareto.Point{Losses: []float64{x, 1 - x*x + 0.1*r.Float64()}})
		}
	}
}
