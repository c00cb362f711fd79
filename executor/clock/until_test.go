package clock

import (
	"context"
	"errors"
	"testing"
)

// Until asks until done says yes, sleeping between asks, and gives up with ctx's error.
func TestUntil(t *testing.T) {
	asks := 0
	if err := Until(context.Background(), Wall{}, 1, func() bool { asks++; return asks == 3 }); err != nil || asks != 3 {
		t.Fatalf("until the third ask: %v after %d", err, asks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	asks = 0
	err := Until(ctx, Wall{}, 1, func() bool {
		asks++
		if asks == 2 {
			cancel()
		}
		return false
	})
	if !errors.Is(err, context.Canceled) || asks != 2 {
		t.Fatalf("cancelled: %v after %d asks", err, asks)
	}
}
