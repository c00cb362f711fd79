package heartbeat

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/clock"
)

// A watcher sees a beating driver as alive, and a driver that stopped beating as gone after the
// timeout, not before; in virtual time (it waited on the wall clock, and a loaded 2-core machine
// under -race once went 300 ms without a beat read while the driver beat on).
func TestWatchSeesTheDriverGo(t *testing.T) {
	store, err := file.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	s := clock.NewSim(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	var watchErr error
	var stopped, seenGone time.Time
	err = s.Run(context.Background(), func(ctx context.Context) {
		beating, stopBeating := clock.WithCancel(s, ctx)
		s.Go("beat", func() { Beat(beating, s, store, "r1", 10*time.Second, func(err error) { t.Error(err) }) })
		done := clock.NewQueue[error](s)
		s.Go("watch", func() { done.Put(Watch(ctx, s, store, "r1", time.Minute, 2*time.Second)) })
		s.Sleep(ctx, time.Hour) // an hour of beats, the watcher calm
		stopped = s.Now()
		stopBeating()
		watchErr, _ = done.Get(ctx)
		seenGone = s.Now()
	})
	if err != nil {
		t.Fatal(err)
	}
	// The last beat came at most 10 s before the stop; the watcher polls every 2 s.
	if el := seenGone.Sub(stopped); el < 50*time.Second || el > 62*time.Second || watchErr == nil || !strings.Contains(watchErr.Error(), "no heartbeat") {
		t.Fatalf("seen gone %v after the beats stopped (a minute's timeout, 10 s beats): %v", el, watchErr)
	}
}

// A run whose beat was never written (a driver that died before its first) is gone after the
// timeout too; the watch ends with its context.
func TestWatchWithoutAnyBeat(t *testing.T) {
	store, _ := file.New(filepath.Join(t.TempDir(), "store"))
	s := clock.NewSim(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	var gone error
	var after time.Duration
	s.Run(context.Background(), func(ctx context.Context) {
		start := s.Now()
		gone = Watch(ctx, s, store, "none", 100*time.Second, 10*time.Second)
		after = s.Now().Sub(start)
	})
	if gone == nil || after != 100*time.Second {
		t.Fatalf("no beat: %v after %v", gone, after)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Watch(ctx, nil, store, "none", time.Hour, 10*time.Millisecond); err != context.Canceled {
		t.Fatalf("cancelled watch: %v", err)
	}
}
