package storetest

import (
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// The lease is taken, renewed, kept from others until it runs out (at its expiry, in the
// caller's time), stolen after, and released only by its holder.
func testLeases(t *testing.T, open Open) {
	s := open(t)
	const ttl = 30 * time.Second
	acquire := func(holder string, now time.Time, want bool) {
		t.Helper()
		got, err := s.AcquireLease(ctx(t), "driver", holder, ttl, now)
		must(t, err)
		if got != want {
			t.Fatalf("AcquireLease(%s, t0+%v) = %v, want %v", holder, now.Sub(t0()), got, want)
		}
	}
	holds := func(holder string, until time.Time) {
		t.Helper()
		h, exp, err := s.Lease(ctx(t), "driver")
		must(t, err)
		if h != holder || !exp.Equal(until) {
			t.Fatalf("Lease = %q until %v, want %q until %v", h, exp, holder, until)
		}
	}
	holds("", time.Time{})
	acquire("a", t0(), true)
	holds("a", micro(t0().Add(ttl)))
	acquire("b", t0().Add(10*time.Second), false)
	acquire("a", t0().Add(20*time.Second), true) // renewal: until t0+50s
	holds("a", micro(t0().Add(50*time.Second)))
	acquire("b", t0().Add(49*time.Second), false)
	acquire("b", t0().Add(50*time.Second), true) // ran out at its expiry: stolen
	holds("b", micro(t0().Add(80*time.Second)))
	acquire("a", t0().Add(51*time.Second), false)

	must(t, s.ReleaseLease(ctx(t), "driver", "a")) // not a's: nothing happens
	holds("b", micro(t0().Add(80*time.Second)))
	must(t, s.ReleaseLease(ctx(t), "driver", "b"))
	holds("", time.Time{})
	acquire("a", t0().Add(52*time.Second), true)

	// Leases are independent of each other.
	ok, err := s.AcquireLease(ctx(t), "reaper", "b", ttl, t0())
	if err != nil || !ok {
		t.Fatalf("another lease: %v, %v", ok, err)
	}
	holds("a", micro(t0().Add(82*time.Second)))
	_, err = s.AcquireLease(ctx(t), "driver", "a", 0, t0())
	wantErr(t, err, store.ErrInvalid, "ttl")
	must(t, s.ReleaseLease(ctx(t), "nothing", "a"))
}
