package clock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
)

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Sleeping actors wake in the order of their deadlines, at their deadlines, however long the
// sleeps: an hour of virtual time passes at once.
func TestSimSleepsAdvanceVirtualTime(t *testing.T) {
	s := clock.NewSim(epoch)
	var order []string
	start := time.Now()
	err := s.Run(context.Background(), func(ctx context.Context) {
		done := clock.NewQueue[string](s)
		for i, d := range []time.Duration{time.Hour, time.Minute, 30 * time.Minute} {
			s.Go(fmt.Sprint("sleeper", i), func() {
				if err := s.Sleep(ctx, d); err != nil {
					t.Error(err)
				}
				done.Put(fmt.Sprintf("%v@%v", d, s.Now().Sub(epoch)))
			})
		}
		for range 3 {
			v, err := done.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, v)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1m0s@1m0s", "30m0s@30m0s", "1h0m0s@1h0m0s"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("woke as %v, want %v", order, want)
	}
	if wall := time.Since(start); wall > 5*time.Second {
		t.Fatalf("an hour of virtual time took %v of wall time", wall)
	}
}

// A program of racing actors (all ready at once, exchanging through queues and channels, with
// timers at equal instants) does the same thing every time: the trace of who ran when is a
// function of the program, not of the Go scheduler.
func TestSimIsDeterministic(t *testing.T) {
	trace := func() string {
		s := clock.NewSim(epoch)
		var b strings.Builder
		err := s.Run(context.Background(), func(ctx context.Context) {
			q := clock.NewQueue[int](s)
			ch := make(chan int, 100)
			for i := range 8 {
				s.Go(fmt.Sprint("w", i), func() {
					for j := range 5 {
						s.Sleep(ctx, time.Duration((i*7+j*3)%4)*time.Second) // many equal instants
						q.Put(i*10 + j)
						ch <- i*10 + j
						clock.Notify(s, ch)
					}
				})
			}
			s.Go("reader", func() {
				for range 40 {
					v, _, _ := clock.Recv(ctx, s, ch)
					fmt.Fprintf(&b, "r%d@%v ", v, s.Now().Sub(epoch))
				}
			})
			for range 40 {
				v, _ := q.Get(ctx)
				fmt.Fprintf(&b, "q%d ", v)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := trace()
	for range 20 {
		if got := trace(); got != first {
			t.Fatalf("two runs of one program differ:\n%s\n%s", first, got)
		}
	}
}

// Cancelling a context made by WithCancel wakes the actors blocked on it, at once, in virtual
// time; a derived context's waiters too.
func TestSimCancelWakesWaiters(t *testing.T) {
	s := clock.NewSim(epoch)
	err := s.Run(context.Background(), func(ctx context.Context) {
		cctx, cancel := clock.WithCancel(s, ctx)
		derived, stop := context.WithTimeout(cctx, time.Hour) // a plain context under it
		defer stop()
		woke := clock.NewQueue[error](s)
		s.Go("sleeper", func() { woke.Put(s.Sleep(derived, 24*time.Hour)) })
		s.Go("getter", func() {
			_, err := clock.NewQueue[int](s).Get(cctx)
			woke.Put(err)
		})
		s.Go("canceller", func() {
			s.Sleep(ctx, time.Minute)
			cancel()
		})
		for range 2 {
			if err, _ := woke.Get(ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("woke with %v, want context.Canceled", err)
			}
		}
		if got := s.Now().Sub(epoch); got != time.Minute {
			t.Errorf("woke at %v, want at the cancel (1m)", got)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An AfterFunc runs at its time unless stopped first.
func TestSimAfterFunc(t *testing.T) {
	s := clock.NewSim(epoch)
	var ran []string
	err := s.Run(context.Background(), func(ctx context.Context) {
		s.AfterFunc(2*time.Second, func() { ran = append(ran, fmt.Sprint("a@", s.Now().Sub(epoch))) })
		stopped := s.AfterFunc(time.Second, func() { ran = append(ran, "stopped one ran") })
		if !stopped.Stop() {
			t.Error("Stop of a pending timer said it had fired")
		}
		s.Sleep(ctx, 3*time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ran) != "[a@2s]" {
		t.Fatalf("ran %v", ran)
	}
}

// Actors that all wait on what nobody will bring are a deadlock, named, not a hang.
func TestSimReportsDeadlock(t *testing.T) {
	s := clock.NewSim(epoch)
	err := s.Run(context.Background(), func(ctx context.Context) {
		q := clock.NewQueue[int](s)
		s.Go("forgotten", func() { q.Get(ctx) })
		q.Get(ctx)
	})
	if !errors.Is(err, clock.ErrDeadlock) || !strings.Contains(err.Error(), "forgotten (on a queue)") {
		t.Fatalf("err = %v, want a deadlock naming the blocked actors", err)
	}
}

// The wall clock's queue and Recv work across goroutines.
func TestWallQueueAndRecv(t *testing.T) {
	var c clock.Clock = clock.Wall{}
	q := clock.NewQueue[int](c)
	ch := make(chan int, 1)
	c.Go("sender", func() {
		q.Put(1)
		ch <- 2
		close(ch)
	})
	ctx := context.Background()
	if v, err := q.Get(ctx); v != 1 || err != nil {
		t.Fatalf("Get = %d, %v", v, err)
	}
	if v, ok, err := clock.Recv(ctx, c, ch); v != 2 || !ok || err != nil {
		t.Fatalf("Recv = %d, %v, %v", v, ok, err)
	}
	if _, ok, _ := clock.Recv(ctx, c, ch); ok {
		t.Fatal("Recv of a closed channel said ok")
	}
	cctx, cancel := clock.WithCancel(c, ctx)
	cancel()
	if _, err := q.Get(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get on a cancelled context = %v", err)
	}
}

// A background sleeper (a progress heartbeat) wakes at its times while other timers are pending,
// never moves time on by itself, and leaves a deadlock a deadlock.
func TestSimSleepBackground(t *testing.T) {
	s := clock.NewSim(epoch)
	var beats []time.Duration
	err := s.Run(context.Background(), func(ctx context.Context) {
		hctx, stop := clock.WithCancel(s, ctx)
		ended := clock.NewQueue[struct{}](s)
		s.Go("heartbeat", func() {
			defer ended.Put(struct{}{})
			for clock.SleepBackground(hctx, s, 10*time.Second) == nil {
				beats = append(beats, s.Now().Sub(epoch))
			}
		})
		s.Sleep(ctx, 35*time.Second) // the work
		stop()
		ended.Get(ctx)
	})
	if err != nil || fmt.Sprint(beats) != "[10s 20s 30s]" || s.Now().Sub(epoch) != 35*time.Second {
		t.Fatalf("%v: beats %v, now %v", err, beats, s.Now().Sub(epoch))
	}
	s = clock.NewSim(epoch)
	err = s.Run(context.Background(), func(ctx context.Context) {
		s.Go("heartbeat", func() {
			for clock.SleepBackground(ctx, s, 10*time.Second) == nil {
			}
		})
		clock.NewQueue[int](s).Get(ctx) // nothing will ever put
	})
	if !errors.Is(err, clock.ErrDeadlock) || s.Now() != epoch {
		t.Fatalf("a heartbeat beside a deadlock: %v at %v", err, s.Now().Sub(epoch))
	}
}
