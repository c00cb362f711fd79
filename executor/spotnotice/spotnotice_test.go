package spotnotice

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// A notice given on a node reaches the run's driver within one poll, once; another run's does
// not; a source waits, in its clock's time, until one comes or its context ends.
func TestGivenNoticeReachesTheDriver(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewSim(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	src := &Source{Store: store, RunID: "run-a", Clock: clk, Every: 5 * time.Second}
	var got []cloud.Notice
	var at []time.Duration
	err = clk.Run(context.Background(), func(ctx context.Context) {
		start := clk.Now()
		clk.Go("node", func() {
			clk.Sleep(ctx, 12*time.Second)
			if err := Give(ctx, store, "run-b", "i-other", "not ours"); err != nil {
				t.Error(err)
			}
			if err := Give(ctx, store, "run-a", "i-0abc", "spot interruption notice: EC2 will terminate this instance at 12:02"); err != nil {
				t.Error(err)
			}
			Give(ctx, store, "run-a", "i-0abc", "spot interruption notice: EC2 will terminate this instance at 12:02") // a second worker there
		})
		n, err := src.NextNotice(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		got, at = append(got, n), append(at, clk.Now().Sub(start))
		wait, cancel := clock.WithCancel(clk, ctx) // a minute more, in virtual time
		defer cancel()
		clk.AfterFunc(time.Minute, cancel)
		if n, err := src.NextNotice(wait); err == nil {
			t.Errorf("a second notice: %+v", n)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Node != "i-0abc" || !strings.Contains(got[0].Reason, "EC2 will terminate") || at[0] != 15*time.Second {
		t.Fatalf("notices %+v at %v, want i-0abc's at the first poll after it was given (15 s)", got, at)
	}
	if err := Give(context.Background(), store, "run-a", "../x", "no"); err == nil {
		t.Fatal("a notice for a node named ../x was written")
	}
}
