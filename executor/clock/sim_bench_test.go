package clock

import (
	"context"
	"testing"
	"time"
)

// One actor of 10,000 woken at a time, each blocked on its own queue and on the run's context
// (issue 39: every gang's actor waits on the run's context too; a waiter list walked at each
// wake made a wake cost the number of actors).
func BenchmarkSimWake(b *testing.B) {
	const actors = 10_000
	s := NewSim(time.Unix(0, 0))
	err := s.Run(context.Background(), func(ctx context.Context) {
		queues := make([]*Queue[int], actors)
		for i := range queues {
			q := NewQueue[int](s)
			queues[i] = q
			s.Go("waiter", func() {
				for {
					if _, err := q.Get(ctx); err != nil {
						return
					}
				}
			})
		}
		s.Sleep(ctx, time.Second) // every waiter blocks
		i := 0
		for b.Loop() {
			queues[i%actors].Put(i)
			s.Sleep(ctx, time.Nanosecond) // the waiter takes it
			i++
		}
	})
	if err != nil {
		b.Fatal(err)
	}
}
