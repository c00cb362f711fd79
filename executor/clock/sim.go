package clock

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sim is a discrete-event clock. Actors (Go, AfterFunc, Run) run one at a time: the running
// actor holds the baton until it blocks in Sleep, Queue.Get or Recv, or ends; the baton then
// goes to the actor that became ready first, and when none is ready, time jumps to the earliest
// timer. Which actor runs next therefore depends only on what the actors did, never on the Go
// scheduler: a program of actors under a Sim is deterministic when its inputs are.
type Sim struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  timerHeap
	ready   []*actor
	running *actor
	actors  map[*actor]struct{} // alive
	// waiters holds, per key, the actors blocked on it: a set, since an actor woken by one of its
	// keys leaves all of them (a run's context is a key of every gang's actor: a list took a walk
	// of them all at each wake), ordered by when they blocked at notify.
	waiters map[any]map[*actor]struct{}
	blocks  uint64 // block calls so far: each actor's blockedAt
	events  int    // timers fired
	// foreground counts the timers that are not background ones (SleepBackground): only they
	// move time on when nothing else would.
	foreground int
	// Run's: its main actor (nil once it ended), and what it waits for.
	inRun bool
	main  *actor
	quiet chan struct{} // closed when main has ended and no actor is ready
	stall chan struct{} // closed when every actor blocks and no timer is left
}

var _ Clock = (*Sim)(nil)

type actor struct {
	name  string
	wake  chan struct{}
	keys  []any     // what it is blocked on
	timer *simTimer // its Sleep, while it sleeps
	why   string
	// blockedAt orders the actors blocked on one key: notify wakes them in the order they blocked.
	blockedAt uint64
	ready     bool
}

type simTimer struct {
	s     *Sim
	at    time.Time
	seq   uint64
	index int    // in the heap; -1 once out of it
	actor *actor // a Sleep's: made ready
	fn    func() // an AfterFunc's: run as a new actor
	// background: a SleepBackground's, which fires only while a foreground timer is pending.
	background bool
}

// NewSim returns a clock that starts at start and moves only as its actors wait.
func NewSim(start time.Time) *Sim {
	return &Sim{now: start, actors: map[*actor]struct{}{}, waiters: map[any]map[*actor]struct{}{}}
}

// Now is the virtual time.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Fired is how many timers have fired: a measure of how much happened.
func (s *Sim) Fired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

// Go starts f as a new actor; it runs once the actors ready before it have had their turn.
func (s *Sim) Go(name string, f func()) {
	s.mu.Lock()
	a := s.spawn(name, f)
	s.mu.Unlock()
	_ = a
}

// spawn makes an actor for f and queues it; s.mu is held.
func (s *Sim) spawn(name string, f func()) *actor {
	a := &actor{name: name, wake: make(chan struct{}, 1), ready: true}
	s.actors[a] = struct{}{}
	s.ready = append(s.ready, a)
	go func() {
		<-a.wake
		defer s.exit(a)
		f()
	}()
	return a
}

func (s *Sim) exit(a *actor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.actors, a)
	if a == s.main {
		s.main = nil
	}
	s.running = nil
	s.dispatch()
}

// Sleep blocks the running actor for d of virtual time, or until ctx (made by WithCancel, or
// the context Run passes) is cancelled.
func (s *Sim) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	s.mu.Lock()
	a := s.self()
	a.timer = s.addTimer(d, a, nil)
	s.block(a, ctx, nil, "sleep")
	return ctx.Err()
}

// SleepBackground is Sleep for an actor that only watches (a progress heartbeat): under a Sim
// its timer fires only while some other timer is pending, so it never keeps virtual time going
// by itself, and a run whose actors all wait on what nothing will bring still ends in
// ErrDeadlock. Under any other clock it is c.Sleep.
func SleepBackground(ctx context.Context, c Clock, d time.Duration) error {
	s, ok := c.(*Sim)
	if !ok {
		return c.Sleep(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	a := s.self()
	a.timer = s.addTimer(max(d, 0), a, nil)
	a.timer.background = true
	s.foreground-- // addTimer counted it
	s.block(a, ctx, nil, "sleep in the background")
	return ctx.Err()
}

// AfterFunc runs f as a new actor once d of virtual time has passed.
func (s *Sim) AfterFunc(d time.Duration, f func()) Timer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addTimer(max(d, 0), nil, f)
}

// Stop cancels a timer that has not fired.
func (t *simTimer) Stop() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.s.timers, t.index)
	t.s.forget(t)
	return true
}

// forget counts a timer out of the heap; s.mu is held.
func (s *Sim) forget(t *simTimer) {
	if !t.background {
		s.foreground--
	}
}

func (s *Sim) addTimer(d time.Duration, a *actor, f func()) *simTimer {
	s.seq++
	t := &simTimer{s: s, at: s.now.Add(d), seq: s.seq, actor: a, fn: f}
	heap.Push(&s.timers, t)
	s.foreground++
	return t
}

// wait blocks the running actor until key is notified or ctx is cancelled; ctx's error then.
func (s *Sim) wait(ctx context.Context, key any, why string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.block(s.self(), ctx, key, why)
	return ctx.Err()
}

// notify makes the actors blocked on key ready. Any goroutine may call it: when no actor runs
// (every one was blocked), it hands the baton on itself.
func (s *Sim) notify(key any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	woken := make([]*actor, 0, len(s.waiters[key]))
	for a := range s.waiters[key] {
		woken = append(woken, a)
	}
	slices.SortFunc(woken, func(a, b *actor) int { return cmp.Compare(a.blockedAt, b.blockedAt) })
	for _, a := range woken { // makeReady edits the set
		s.makeReady(a)
	}
	if s.running == nil {
		s.dispatch()
	}
}

// self is the running actor; s.mu is held. Blocking from outside an actor is a program error.
func (s *Sim) self() *actor {
	if s.running == nil {
		s.mu.Unlock()
		panic("clock: a Sim's blocking call from outside its actors (use Sim.Go or Sim.Run)")
	}
	return s.running
}

// block registers a (the running actor) on key and on every cancellable context up ctx's
// chain, hands the baton on, and returns once a has it again. s.mu is held on entry and
// released.
func (s *Sim) block(a *actor, ctx context.Context, key any, why string) {
	a.ready, a.why = false, why
	s.blocks++
	a.blockedAt = s.blocks
	if key != nil {
		a.keys = append(a.keys, key)
	}
	for rec := cancelOf(ctx); rec != nil; rec = rec.parent {
		a.keys = append(a.keys, rec)
	}
	for _, k := range a.keys {
		w := s.waiters[k]
		if w == nil {
			w = map[*actor]struct{}{}
			s.waiters[k] = w
		}
		w[a] = struct{}{}
	}
	s.running = nil
	s.dispatch()
	s.mu.Unlock()
	<-a.wake
}

// makeReady queues a blocked actor for the baton and forgets what it waited on.
func (s *Sim) makeReady(a *actor) {
	if a.ready {
		return
	}
	for _, k := range a.keys {
		delete(s.waiters[k], a)
		if len(s.waiters[k]) == 0 {
			delete(s.waiters, k)
		}
	}
	a.keys = a.keys[:0]
	if a.timer != nil {
		if a.timer.index >= 0 {
			heap.Remove(&s.timers, a.timer.index)
			s.forget(a.timer)
		}
		a.timer = nil
	}
	a.ready, a.why = true, ""
	s.ready = append(s.ready, a)
}

// dispatch gives the baton to the next ready actor, firing timers in order until one is; s.mu
// is held and no actor runs. Outside Run nothing runs; once Run's main actor has ended, time
// stands still (what is left waits for the next Run).
func (s *Sim) dispatch() {
	for s.running == nil && s.inRun {
		if len(s.ready) > 0 {
			a := s.ready[0]
			s.ready = s.ready[1:]
			s.running = a
			a.wake <- struct{}{}
			return
		}
		if s.main == nil {
			closeOnce(s.quiet)
			return
		}
		if s.foreground > 0 { // background timers alone never move time on
			t := heap.Pop(&s.timers).(*simTimer)
			s.forget(t)
			if t.at.After(s.now) {
				s.now = t.at
			}
			s.events++
			if t.actor != nil {
				t.actor.timer = nil
				s.makeReady(t.actor)
			} else {
				s.spawn("timer", t.fn)
			}
			continue
		}
		closeOnce(s.stall)
		return
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// ErrDeadlock is wrapped by Run's error when every actor is blocked on something no actor or
// timer will ever bring.
var ErrDeadlock = errors.New("clock: every actor is blocked and no timer is left")

// Run runs f as the main actor, with a context that is cancelled (waking its waiters) when ctx
// is, and returns once f has returned and the actors it left ready have had their turn: time
// stops there. Actors still asleep or blocked stay so until the next Run, which goes on from
// where this one stopped (a driver that died, and one that resumes in the same world). It
// returns ErrDeadlock, naming what each actor waits on, when every actor is blocked on what no
// actor or timer will bring.
func (s *Sim) Run(ctx context.Context, f func(ctx context.Context)) error {
	inner, cancel := WithCancel(s, ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // an interrupt from outside: wake whoever waits on it
	defer stop()
	s.mu.Lock()
	if s.inRun {
		s.mu.Unlock()
		panic("clock: Sim.Run while it runs")
	}
	s.inRun, s.quiet, s.stall = true, make(chan struct{}), make(chan struct{})
	s.main = s.spawn("main", func() { f(inner) })
	if s.running == nil {
		s.dispatch()
	}
	s.mu.Unlock()
	var err error
	select {
	case <-s.quiet:
	case <-s.stall:
		err = fmt.Errorf("%w: %s", ErrDeadlock, s.blocked())
	}
	s.mu.Lock()
	s.inRun = false
	s.mu.Unlock()
	return err
}

// blocked lists the blocked actors and what they wait on.
func (s *Sim) blocked() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for a := range s.actors {
		out = append(out, fmt.Sprintf("%s (on %s)", a.name, a.why))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

type timerHeap []*simTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*simTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
