package builtin

import (
	"context"
	"errors"
	"io"
	"testing"
)

// Arguments that name no trainer, or a synthetic trainer without its spec, are usage errors that
// list the trainers; nothing runs.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"synthetic"}, {"synthetic", "--bogus"}} {
		if err := Main(context.Background(), args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
