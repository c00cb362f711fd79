package clock

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// Clock is what the run path knows of time.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// Sleep blocks the calling actor for d, or until ctx is done (then its error).
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc runs f as a new actor once d has passed; Stop cancels it if it has not started.
	AfterFunc(d time.Duration, f func()) Timer
	// Go runs f as a new actor (name says what it is, in a Sim's deadlock report).
	Go(name string, f func())
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; false when it had started already (or was stopped).
	Stop() bool
}

// Wall is the real clock: goroutines, timers, time.Now.
type Wall struct{}

var _ Clock = Wall{}

// Now is time.Now.
func (Wall) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (Wall) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterFunc is time.AfterFunc.
func (Wall) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Go starts a goroutine.
func (Wall) Go(_ string, f func()) { go f() }

// Or is c, or the wall clock when c is nil: the default of every Config that takes a Clock.
func Or(c Clock) Clock {
	if c == nil {
		return Wall{}
	}
	return c
}

// WithCancel is context.WithCancel made known to c: under a Sim, an actor blocked on the
// returned context (or one derived from it) wakes as soon as cancel is called, in a
// deterministic order; under the wall clock it is context.WithCancel.
func WithCancel(c Clock, parent context.Context) (context.Context, context.CancelFunc) {
	s, ok := c.(*Sim)
	if !ok {
		return context.WithCancel(parent)
	}
	ctx, cancel := context.WithCancel(parent)
	rec := &cancelRecord{parent: cancelOf(parent)}
	ctx = context.WithValue(ctx, cancelKey{}, rec)
	return ctx, func() {
		cancel()
		s.notify(rec)
	}
}

// Queue is a mailbox between actors: any number put, one gets, in the order put.
type Queue[T any] struct {
	c      Clock
	sim    *Sim
	mu     sync.Mutex
	items  []T
	signal chan struct{} // wall clock: a put since the last get looked
}

// NewQueue makes a queue on clock c.
func NewQueue[T any](c Clock) *Queue[T] {
	s, _ := c.(*Sim)
	return &Queue[T]{c: c, sim: s, signal: make(chan struct{}, 1)}
}

// Put appends v and wakes the getter; it never blocks.
func (q *Queue[T]) Put(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	if q.sim != nil {
		q.sim.notify(q)
		return
	}
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Get takes the oldest item, waiting for one; ctx's error when it is done first.
func (q *Queue[T]) Get(ctx context.Context) (T, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			var zero T
			q.items[0] = zero
			q.items = q.items[1:]
			q.mu.Unlock()
			return v, nil
		}
		q.mu.Unlock()
		var zero T
		if q.sim != nil {
			if err := q.sim.wait(ctx, q, "a queue"); err != nil {
				return zero, err
			}
			continue
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// Recv receives from ch as an actor of c: under a Sim, ch must be buffered (or closed) by a
// sender that calls Notify after each send and close. ok is false once ch is closed.
func Recv[T any](ctx context.Context, c Clock, ch <-chan T) (v T, ok bool, err error) {
	if s, isSim := c.(*Sim); isSim {
		for {
			select {
			case v, ok = <-ch:
				return v, ok, nil
			default:
			}
			if err := s.wait(ctx, chanKey(ch), "a channel"); err != nil {
				return v, false, err
			}
		}
	}
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

// Notify wakes the actors of c that Recv from ch: call it after every send on ch and after
// closing it. Under the wall clock it does nothing.
func Notify[T any](c Clock, ch chan T) {
	if s, ok := c.(*Sim); ok {
		s.notify(chanKey((<-chan T)(ch)))
	}
}

// chanKey names a channel whatever its direction.
func chanKey[T any](ch <-chan T) any {
	return reflect.ValueOf(ch).UnsafePointer()
}

// cancelRecord marks a context made by WithCancel under a Sim; actors blocked on a context wait
// on every record up its chain.
type cancelRecord struct{ parent *cancelRecord }

type cancelKey struct{}

func cancelOf(ctx context.Context) *cancelRecord {
	rec, _ := ctx.Value(cancelKey{}).(*cancelRecord)
	return rec
}

// Frozen is a clock that stays at At: for replaying a journal "as of" its last event. It waits
// as the wall clock does.
type Frozen struct {
	Wall
	At time.Time
}

// Now is At.
func (f Frozen) Now() time.Time { return f.At }

// Until asks done every interval, sleeping on c between the asks, until it says yes or ctx ends
// (ctx's error): how tests and harnesses wait on a real server, which no virtual clock drives.
func Until(ctx context.Context, c Clock, every time.Duration, done func() bool) error {
	for !done() {
		if err := c.Sleep(ctx, every); err != nil {
			return err
		}
	}
	return nil
}
