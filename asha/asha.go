package asha

import (
	"fmt"
	"slices"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Job is work for a free slot: train Trial of Bracket from iteration From to To (rung Rung).
// New says the trial starts here, at its bracket's rung 0: its configuration is drawn now.
type Job struct {
	Trial   int
	Bracket int
	Rung    int
	From    int
	To      int
	New     bool
}

// Ladder is one ASHA run's promotion state: the results each rung holds, which trials it has
// promoted, and the jobs handed out and not yet reported. It is a pure state machine: Next hands
// out the next job, Report and Drop take what came of one; the same calls in the same order give
// the same decisions, so a run replayed from its journal takes none twice.
//
// The rule is the ASHA paper's (Li et al., MLSys 2020, Algorithm 2): a free slot first gets the
// best not-yet-promoted trial that is in the top floor(n/eta) of the n results of its rung, the
// highest rung first (bracket by bracket, from 0, at equal rungs); else a new trial, while any
// remain. Results rank by the metric (lower first: give losses), ties by the order they were
// reported in. One addition to the paper's rule: a bracket that would end with its last rung
// empty trains its best trial on, rung by rung, up to max_iters (finish).
type Ladder struct {
	cfg      spec.ASHA
	rungs    [][]int  // rungs[b][k]: the iteration rung k of bracket b trains up to
	levels   [][]rung // levels[b][k]
	started  int      // trials handed out at rung 0
	inFlight flights
	reported int // results so far, all rungs: the order ties are broken by
}

type rung struct {
	n          int     // results reported
	unpromoted results // a heap, best at [0]: results go in one by one and leave best first
	promoted   sorted  // their results at this rung, best first
	rank       int     // the best unpromoted result's rank among promoted ones, when ranked
	ranked     bool
	// points are a multi-objective ladder's results (ReportPoint), in the order reported: each
	// result's loss above is its place in pareto.Order of them, set again at every result.
	points []scoredPoint
}

// scoredPoint is one result of a multi-objective ladder.
type scoredPoint struct {
	order, trial int
	point        pareto.Point
}

type result struct {
	loss  float64
	order int // the n-th result of the run: earlier ranks first at equal loss
	trial int
}

func less(a, b result) int {
	switch {
	case a.loss < b.loss:
		return -1
	case a.loss > b.loss:
		return 1
	}
	return a.order - b.order
}

// New starts the promotion state of an ASHA job (a validated spec.ASHA).
func New(cfg spec.ASHA) *Ladder {
	l := &Ladder{cfg: cfg}
	for b := range max(cfg.Brackets, 1) {
		r := cfg.Rungs(b)
		l.rungs = append(l.rungs, r)
		l.levels = append(l.levels, make([]rung, len(r)))
	}
	return l
}

// Reset starts the ladder over, as New would, keeping its memory (the simulator runs thousands
// of ladders of one job).
func (l *Ladder) Reset() {
	l.started, l.reported = 0, 0
	l.inFlight = flights{jobs: l.inFlight.jobs[:0], on: l.inFlight.on[:0]}
	for b := range l.levels {
		for k := range l.levels[b] {
			lv := &l.levels[b][k]
			*lv = rung{unpromoted: lv.unpromoted[:0], points: lv.points[:0]}
		}
	}
}

// Rungs is bracket b's rungs, as iterations.
func (l *Ladder) Rungs(b int) []int { return l.rungs[b] }

// Next is the job a free slot should take, and false when there is none now (every trial has
// started and nothing can be promoted until a running job reports). A job handed out is in
// flight until Report or Drop. Next is Peek then Take.
func (l *Ladder) Next() (Job, bool) {
	j, ok := l.Peek()
	if ok {
		l.Take(j)
	}
	return j, ok
}

// Peek is the job Next would hand out, without handing it out: a driver decides, journals the
// decision, and applies it (Take), so that a replay of its journal takes the same one.
func (l *Ladder) Peek() (Job, bool) {
	best, found := Job{}, false
	for b := range l.levels {
		for k := len(l.levels[b]) - 2; k >= 0; k-- {
			if found && k <= best.Rung-1 {
				break // a higher rung of an earlier bracket goes first
			}
			if t, ok := l.levels[b][k].promotable(l.cfg.Eta); ok {
				best, found = l.promotion(t.trial, b, k+1), true
				break
			}
		}
	}
	switch {
	case found:
		return best, true
	case l.started < l.cfg.Trials:
		t := l.started
		b := t % max(l.cfg.Brackets, 1)
		return Job{Trial: t, Bracket: b, Rung: 0, From: 0, To: l.rungs[b][0], New: true}, true
	case l.inFlight.n > 0:
		return Job{}, false
	}
	// The last resort once nothing else can run (every trial started, none in flight, nothing
	// promotable): a bracket none of whose trials reached its last rung promotes the best of its
	// highest rung that has results, so that the winner trains max_iters as synchronous SHA's
	// last stage does. The paper's rule alone would end a job of N trials with its last rung
	// empty whenever the rung below holds fewer than eta results.
	b, k, ok := l.unfinished()
	if !ok {
		return Job{}, false
	}
	return l.promotion(l.levels[b][k].unpromoted[0].trial, b, k+1), true
}

func (l *Ladder) promotion(trial, b, rung int) Job {
	return Job{Trial: trial, Bracket: b, Rung: rung, From: l.rungs[b][rung-1], To: l.rungs[b][rung]}
}

// Take hands out job j: a new trial (the next to start) or the promotion of a trial that
// reported at the rung below and has not gone on. It refuses anything else (a journal that
// does not fit the spec), changing nothing.
func (l *Ladder) Take(j Job) error {
	if _, busy := l.inFlight.get(j.Trial); busy {
		return fmt.Errorf("asha: trial %d already has a job in flight", j.Trial)
	}
	if j.Bracket < 0 || j.Bracket >= len(l.levels) || j.Rung < 0 || j.Rung >= len(l.levels[j.Bracket]) {
		return fmt.Errorf("asha: trial %d: bracket %d rung %d is not in the ladder", j.Trial, j.Bracket, j.Rung)
	}
	if j.Rung == 0 {
		if j.Trial != l.started || l.started >= l.cfg.Trials || j.Trial%max(l.cfg.Brackets, 1) != j.Bracket {
			return fmt.Errorf("asha: trial %d of bracket %d cannot start now (the next to start is %d of %d)", j.Trial, j.Bracket, l.started, l.cfg.Trials)
		}
		l.started++
	} else {
		lv := &l.levels[j.Bracket][j.Rung-1]
		i := 0 // the best, as the rule promotes; any other a journal names is looked for
		if len(lv.unpromoted) == 0 || lv.unpromoted[0].trial != j.Trial {
			i = slices.IndexFunc(lv.unpromoted, func(r result) bool { return r.trial == j.Trial })
		}
		if i < 0 {
			return fmt.Errorf("asha: trial %d has no result at bracket %d rung %d to be promoted from", j.Trial, j.Bracket, j.Rung-1)
		}
		r := lv.unpromoted.remove(i)
		lv.promoted.insert(r)
		lv.ranked = false
	}
	j.New = j.Rung == 0
	j.From, j.To = 0, l.rungs[j.Bracket][j.Rung]
	if j.Rung > 0 {
		j.From = l.rungs[j.Bracket][j.Rung-1]
	}
	l.inFlight.set(j)
	return nil
}

// Jobs are the jobs in flight, by trial: what a driver taking over a run relaunches.
func (l *Ladder) Jobs() []Job {
	out := make([]Job, 0, l.inFlight.n)
	for t, on := range l.inFlight.on {
		if on {
			out = append(out, l.inFlight.jobs[t])
		}
	}
	return out
}

// unfinished is the first bracket with nothing at its last rung whose highest rung with results
// still has a trial to train on (its best not yet gone on, or gone on and dropped), and that rung.
func (l *Ladder) unfinished() (bracket, rung int, ok bool) {
	for b := range l.levels {
		last := len(l.levels[b]) - 1
		if l.levels[b][last].n > 0 {
			continue
		}
		for k := last - 1; k >= 0; k-- {
			if lv := &l.levels[b][k]; lv.n > 0 {
				if len(lv.unpromoted) > 0 {
					return b, k, true
				}
				break
			}
		}
	}
	return 0, 0, false
}

// promotable is the best unpromoted result if it ranks in the top floor(n/eta) of the rung.
func (r *rung) promotable(eta int) (result, bool) {
	if len(r.unpromoted) == 0 {
		return result{}, false
	}
	top := r.unpromoted[0]
	// Its rank is the number of promoted results better than it (every unpromoted one is worse).
	// It changes only with a result or a promotion here, and Peek asks far more often: kept.
	if !r.ranked {
		r.rank = r.promoted.rank(top)
		r.ranked = true
	}
	return top, r.rank < r.n/eta
}

// results is a binary min-heap of results by less (container/heap's, without boxing each one:
// the simulator pushes millions).
type results []result

func (h *results) push(r result) {
	*h = append(*h, r)
	h.up(len(*h) - 1)
}

// remove takes out the i-th result (0: the best).
func (h *results) remove(i int) result {
	old := *h
	n := len(old) - 1
	r := old[i]
	old[i] = old[n]
	*h = old[:n]
	if i < n {
		if !h.down(i) {
			h.up(i)
		}
	}
	return r
}

func (h results) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if less(h[i], h[parent]) >= 0 {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// down sifts the i-th result down, and says whether it moved.
func (h results) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if r := child + 1; r < len(h) && less(h[r], h[child]) < 0 {
			child = r
		}
		if less(h[child], h[i]) >= 0 {
			break
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
	return i > start
}

// sorted is a list of results, best first, in blocks of at most 2*sortedBlock: an insertion
// moves one block, not the whole list (a rung of 10,000 promoted trials made a simulated ASHA
// run quadratic in its trials), and a rank is two binary searches (the blocks' last results,
// then one block) and a count of the results before the block.
type sorted struct {
	blocks [][]result
	lasts  []result // lasts[k]: blocks[k]'s last (worst) result
	before []int    // before[k]: how many results the blocks before k hold
	n      int
}

const sortedBlock = 128

func (s *sorted) len() int { return s.n }

// first is the best result; the list must not be empty.
func (s *sorted) first() result { return s.blocks[0][0] }

// block is the first block whose last result does not rank before r (len(blocks): none).
func (s *sorted) block(r result) int {
	return lowerBound(s.lasts, r)
}

// lowerBound is how many of rs (sorted) rank before r: slices.BinarySearchFunc with less
// written out, which the simulator's ranks spent a fifth of their time calling through.
func lowerBound(rs []result, r result) int {
	lo, hi := 0, len(rs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x := rs[m]; x.loss < r.loss || (!(x.loss > r.loss) && x.order < r.order) { // less(x, r) < 0
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rank is how many results rank before r.
func (s *sorted) rank(r result) int {
	k := s.block(r)
	if k == len(s.blocks) {
		return s.n
	}
	return s.before[k] + lowerBound(s.blocks[k], r)
}

func (s *sorted) insert(r result) {
	s.n++
	if len(s.blocks) == 0 {
		s.blocks, s.lasts, s.before = append(s.blocks, []result{r}), append(s.lasts, r), append(s.before, 0)
		return
	}
	k := min(s.block(r), len(s.blocks)-1)
	b := s.blocks[k]
	b = slices.Insert(b, lowerBound(b, r), r)
	for j := k + 1; j < len(s.before); j++ {
		s.before[j]++
	}
	if len(b) > 2*sortedBlock {
		tail := slices.Clone(b[sortedBlock:])
		s.blocks = slices.Insert(s.blocks, k+1, tail)
		s.lasts = slices.Insert(s.lasts, k+1, tail[len(tail)-1])
		s.before = slices.Insert(s.before, k+1, s.before[k]+sortedBlock)
		b = b[:sortedBlock:sortedBlock]
	}
	s.blocks[k], s.lasts[k] = b, b[len(b)-1]
}

// restore lays rs (sorted, best first) out in blocks of the lengths given, and says false,
// changing nothing, when they do not add up to rs.
func (s *sorted) restore(rs []result, lengths []int) bool {
	n := 0
	for _, k := range lengths {
		if k <= 0 {
			return false
		}
		n += k
	}
	if n != len(rs) || n == 0 {
		return false
	}
	for _, k := range lengths {
		b := slices.Clone(rs[:k])
		s.blocks, s.lasts, s.before = append(s.blocks, b), append(s.lasts, b[k-1]), append(s.before, s.n)
		s.n += k
		rs = rs[k:]
	}
	return true
}

// all is every result, best first.
func (s *sorted) all() []result {
	out := make([]result, 0, s.n)
	for _, b := range s.blocks {
		out = append(out, b...)
	}
	return out
}

// Report records the loss a job in flight reached at its rung. A trial at its bracket's last
// rung is finished.
func (l *Ladder) Report(trial int, loss float64) error {
	j, ok := l.inFlight.get(trial)
	if !ok {
		return fmt.Errorf("asha: trial %d reported with no job in flight", trial)
	}
	lv := &l.levels[j.Bracket][j.Rung]
	if len(lv.points) > 0 {
		return fmt.Errorf("asha: trial %d: a loss among points at bracket %d rung %d", trial, j.Bracket, j.Rung)
	}
	l.inFlight.del(trial)
	lv.n++
	lv.unpromoted.push(result{loss: loss, order: l.reported, trial: trial})
	lv.ranked = false
	l.reported++
	return nil
}

// ReportPoint records the result a job in flight reached at its rung when several objectives
// or constraints rank results (MO-ASHA, Schmucker et al. 2021): the rung's results are ordered by
// pareto.Order (feasible first, then non-dominated rank, then crowding; ties by the order they
// were reported in), and each result's loss becomes its place in that order, so that promotion,
// Best and Promotable apply the paper's rule to it unchanged. A ladder takes points or losses,
// never both.
func (l *Ladder) ReportPoint(trial int, p pareto.Point) error {
	j, ok := l.inFlight.get(trial)
	if !ok {
		return fmt.Errorf("asha: trial %d reported with no job in flight", trial)
	}
	lv := &l.levels[j.Bracket][j.Rung]
	if lv.n != len(lv.points) {
		return fmt.Errorf("asha: trial %d: a point among losses at bracket %d rung %d", trial, j.Bracket, j.Rung)
	}
	l.inFlight.del(trial)
	lv.points = append(lv.points, scoredPoint{order: l.reported, trial: trial, point: p})
	lv.n++
	l.reported++
	lv.rerank()
	return nil
}

// rerank gives each of a multi-objective rung's results its place in pareto.Order as its loss,
// and lays its unpromoted and promoted results out anew by it.
func (r *rung) rerank() {
	points := make([]pareto.Point, len(r.points))
	for i, p := range r.points {
		points[i] = p.point
	}
	place := make([]float64, len(points))
	for at, i := range pareto.Order(points) {
		place[i] = float64(at)
	}
	promoted := make(map[int]bool, r.promoted.len())
	for _, res := range r.promoted.all() {
		promoted[res.trial] = true
	}
	r.unpromoted, r.promoted = r.unpromoted[:0], sorted{}
	for i, p := range r.points {
		res := result{loss: place[i], order: p.order, trial: p.trial}
		if promoted[p.trial] {
			r.promoted.insert(res)
		} else {
			r.unpromoted.push(res)
		}
	}
	r.ranked = false
}

// Drop ends a job in flight without a result (the trial failed for good): its rung does not count
// it, and the trial goes no further.
func (l *Ladder) Drop(trial int) error {
	if _, ok := l.inFlight.get(trial); !ok {
		return fmt.Errorf("asha: trial %d dropped with no job in flight", trial)
	}
	l.inFlight.del(trial)
	return nil
}

// InFlight is how many jobs are handed out and not yet reported or dropped.
func (l *Ladder) InFlight() int { return l.inFlight.n }

// Started is how many trials have been handed out at rung 0.
func (l *Ladder) Started() int { return l.started }

// Done says the job has ended: every trial started, none in flight, none promotable, and every
// bracket's last rung reached (or its best dropped).
func (l *Ladder) Done() bool {
	if l.started < l.cfg.Trials || l.inFlight.n > 0 || l.anyPromotable() {
		return false
	}
	_, _, unfinished := l.unfinished()
	return !unfinished
}

func (l *Ladder) anyPromotable() bool {
	for b := range l.levels {
		for k := range len(l.levels[b]) - 1 {
			if _, ok := l.levels[b][k].promotable(l.cfg.Eta); ok {
				return true
			}
		}
	}
	return false
}

// Promotable counts the jobs Next could hand out now without starting a trial: for each rung
// below the last, how many of its unpromoted results rank in its top floor(n/eta).
func (l *Ladder) Promotable() int {
	total := 0
	for b := range l.levels {
		for k := range len(l.levels[b]) - 1 {
			lv := &l.levels[b][k]
			room := lv.n/l.cfg.Eta - lv.promoted.len()
			total += max(0, min(room, len(lv.unpromoted)))
		}
	}
	return total
}

// Promotions is how many trials rung k of bracket b has promoted so far.
func (l *Ladder) Promotions(b, k int) int { return l.levels[b][k].promoted.len() }

// Results is how many results rung k of bracket b holds.
func (l *Ladder) Results(b, k int) int { return l.levels[b][k].n }

// Best is the trial with the lowest loss at the highest rung any trial has reached, over all
// brackets (ties: reported first), and false before any result.
func (l *Ladder) Best() (trial int, loss float64, ok bool) {
	top := -1
	var best result
	for b := range l.levels {
		for k := len(l.levels[b]) - 1; k >= 0; k-- {
			lv := &l.levels[b][k]
			if lv.n == 0 {
				continue
			}
			it := l.rungs[b][k]
			cand := lv.best()
			if it > top || (it == top && less(cand, best) < 0) {
				top, best = it, cand
			}
			break
		}
	}
	return best.trial, best.loss, top >= 0
}

func (r *rung) best() result {
	switch {
	case r.promoted.len() == 0:
		return r.unpromoted[0]
	case len(r.unpromoted) == 0 || less(r.promoted.first(), r.unpromoted[0]) < 0:
		return r.promoted.first()
	}
	return r.unpromoted[0]
}

// Clone is a copy of the ladder that changes apart from it: a forecast from where a run stands
// (sim.ASHAStart) while the run goes on.
func (l *Ladder) Clone() *Ladder {
	return l.Redrawn(func(b, k, _ int) []float64 {
		lv := &l.levels[b][k]
		losses := make([]float64, 0, lv.n)
		for _, r := range lv.promoted.all() {
			losses = append(losses, r.loss)
		}
		for _, r := range lv.unpromoted {
			losses = append(losses, r.loss)
		}
		slices.Sort(losses)
		return losses
	})
}

// Redrawn is a copy of the ladder whose results have new losses in the same order: values(b, k,
// n) gives rung k of bracket b's n new losses, sorted (lowest first), and the rung's i-th best
// result takes the i-th. Every decision the ladder took and will take from here ranks them as
// before; what a result reported later beats is drawn afresh. (Best across brackets compares
// rungs drawn apart: it is not kept.) The simulator forecasts the rest
// of a run from where it stands this way: the trials' metrics exchangeable, the order seen kept.
func (l *Ladder) Redrawn(values func(b, k, n int) []float64) *Ladder {
	c := &Ladder{cfg: l.cfg, rungs: l.rungs, started: l.started, reported: l.reported}
	c.inFlight = flights{jobs: slices.Clone(l.inFlight.jobs), on: slices.Clone(l.inFlight.on), n: l.inFlight.n}
	c.levels = make([][]rung, len(l.levels))
	for b := range l.levels {
		c.levels[b] = make([]rung, len(l.levels[b]))
		for k := range l.levels[b] {
			lv := &l.levels[b][k]
			all := make([]result, 0, lv.n)
			all = append(append(all, lv.promoted.all()...), lv.unpromoted...)
			slices.SortFunc(all, less)
			promoted := make(map[int]bool, lv.promoted.len())
			for _, r := range lv.promoted.all() {
				promoted[r.order] = true
			}
			v := values(b, k, len(all))
			nr := rung{n: lv.n}
			for i, r := range all {
				r.loss = v[i]
				if promoted[r.order] {
					nr.promoted.insert(r)
				} else {
					nr.unpromoted.push(r)
				}
			}
			c.levels[b][k] = nr
		}
	}
	return c
}

// flights are the jobs in flight by trial: trials are numbered from 0 as they start, so a slice
// indexed by trial (a map's hashing was a fifth of a simulated ASHA run's time).
type flights struct {
	jobs []Job
	on   []bool // on[t]: trial t has a job in flight
	n    int
}

func (f *flights) get(trial int) (Job, bool) {
	if trial < 0 || trial >= len(f.on) || !f.on[trial] {
		return Job{}, false
	}
	return f.jobs[trial], true
}

// grow makes room for trials below n.
func (f *flights) grow(n int) {
	for len(f.on) < n {
		f.jobs, f.on = append(f.jobs, Job{}), append(f.on, false)
	}
}

func (f *flights) set(j Job) {
	f.grow(j.Trial + 1)
	if !f.on[j.Trial] {
		f.n++
	}
	f.jobs[j.Trial], f.on[j.Trial] = j, true
}

func (f *flights) del(trial int) {
	if f.on[trial] {
		f.jobs[trial], f.on[trial] = Job{}, false // as a restored ladder has it
		f.n--
	}
}
