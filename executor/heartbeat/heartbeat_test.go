package heartbeat

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
)

// A watcher sees a beating driver as alive, and a driver that stopped beating as gone after the
// timeout, not before. The timeout is 100 beats long: with 15 (300 ms) a loaded 2-core machine
// under -race once went that long without a beat read while the driver beat on.
func TestWatchSeesTheDriverGo(t *testing.T) {
	store, err := file.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopBeating := context.WithCancel(context.Background())
	go Beat(ctx, store, "r1", 20*time.Millisecond, func(err error) { t.Error(err) })
	watch := make(chan error, 1)
	go func() { watch <- Watch(context.Background(), store, "r1", 2*time.Second, 10*time.Millisecond) }()
	select {
	case err := <-watch:
		t.Fatalf("a beating driver was seen as gone: %v", err)
	case <-time.After(3 * time.Second):
	}
	stopBeating()
	stopped := time.Now()
	select {
	case err := <-watch:
		if el := time.Since(stopped); el < 1900*time.Millisecond || err == nil || !strings.Contains(err.Error(), "no heartbeat") {
			t.Fatalf("after %v: %v", el, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a driver that stopped beating was never seen as gone")
	}
}

// A run whose beat was never written (a driver that died before its first) is gone after the
// timeout too; the watch ends with its context.
func TestWatchWithoutAnyBeat(t *testing.T) {
	store, _ := file.New(filepath.Join(t.TempDir(), "store"))
	if err := Watch(context.Background(), store, "none", 100*time.Millisecond, 10*time.Millisecond); err == nil {
		t.Fatal("no beat, yet not gone")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Watch(ctx, store, "none", time.Hour, 10*time.Millisecond); err != context.Canceled {
		t.Fatalf("cancelled watch: %v", err)
	}
}
