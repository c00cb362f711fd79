package term

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// Away from a terminal each new drawing is written once, a blank line between them when asked,
// until what is drawn is no longer live; an error in drawing ends the watch with it.
func TestWatch(t *testing.T) {
	frames := []string{"A\n", "A\n", "B\n", "B\n"}
	for _, tc := range []struct {
		blank bool
		want  string
	}{{true, "A\n\nB\n"}, {false, "A\nB\n"}} {
		var out bytes.Buffer
		n := 0
		err := Watch(context.Background(), &out, 1, tc.blank, func() ([]byte, bool, error) {
			n++
			return []byte(frames[n-1]), n < len(frames), nil
		})
		if err != nil || out.String() != tc.want || n != len(frames) {
			t.Errorf("blank %v: %q after %d drawings (%v), want %q after %d", tc.blank, out.String(), n, err, tc.want, len(frames))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	n := 0
	if err := Watch(ctx, &out, time.Hour, true, func() ([]byte, bool, error) { n++; return []byte("live\n"), true, nil }); err != nil || n != 1 || out.String() != "live\n" {
		t.Errorf("an ended context: %q after %d drawings (%v), want one", out.String(), n, err)
	}

	broken := errors.New("journal unreadable")
	if err := Watch(context.Background(), &out, 1, true, func() ([]byte, bool, error) { return nil, true, broken }); !errors.Is(err, broken) {
		t.Errorf("a drawing that fails: %v", err)
	}
}
