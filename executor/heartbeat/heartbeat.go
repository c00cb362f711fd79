package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/clock"
)

// Every is how often the driver beats.
const Every = 10 * time.Second

// DefaultTimeout is how long a worker goes on without a beat before it stops: long enough for a
// driver's restart (`rubberband resume`) and a store's hiccup, short enough that a driver that
// died for good does not keep rented machines training for long.
const DefaultTimeout = 5 * time.Minute

// Key is where run runID's beat lives in the store.
func Key(runID string) string { return "runs/" + runID + "/heartbeat" }

// Beat writes the run's beat now and then every interval of clk (nil: the wall clock) until
// ctx ends. A failed write is reported to errf and retried at the next beat.
func Beat(ctx context.Context, clk clock.Clock, store checkpoint.Store, runID string, every time.Duration, errf func(error)) {
	clk = clock.Or(clk)
	for n := 0; ; n++ {
		beat := fmt.Sprintf("%d %s\n", n, clk.Now().UTC().Format(time.RFC3339Nano))
		if _, err := store.Put(ctx, Key(runID), strings.NewReader(beat)); err != nil && ctx.Err() == nil && errf != nil {
			errf(fmt.Errorf("heartbeat: %w", err))
		}
		if clk.Sleep(ctx, every) != nil {
			return
		}
	}
}

// Watch reads the run's beat every poll of clk (nil: the wall clock) and returns once it has not
// changed for timeout (by the watcher's own clock), with why; or when ctx ends, with ctx's
// error. A beat that cannot be read counts as unchanged.
func Watch(ctx context.Context, clk clock.Clock, store checkpoint.Store, runID string, timeout, poll time.Duration) error {
	clk = clock.Or(clk)
	last, changed := "", clk.Now()
	for {
		if beat, err := read(ctx, store, runID); err == nil && beat != last {
			last, changed = beat, clk.Now()
		}
		if gone := clk.Now().Sub(changed); gone >= timeout {
			return fmt.Errorf("no heartbeat from the driver of run %s for %s: it is gone", runID, gone.Round(time.Second))
		}
		if err := clk.Sleep(ctx, poll); err != nil {
			return err
		}
	}
}

func read(ctx context.Context, store checkpoint.Store, runID string) (string, error) {
	r, _, err := store.Open(ctx, Key(runID))
	if errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 1<<10))
	return string(b), err
}
