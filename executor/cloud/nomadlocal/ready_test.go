package nomadlocal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// A ready client is found by its rb_node; one that is not there keeps the wait going until the
// context ends, and the error says so.
func TestWaitNodeReady(t *testing.T) {
	n := servers.StartNomad(t)
	n.AddClient("i-0123456789abcdef0", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := nomadlocal.WaitNodeReady(ctx, n.Client, "i-0123456789abcdef0", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := nomadlocal.WaitNodeReady(short, n.Client, "i-00000000000000000", 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("absent node: %v", err)
	}
}
