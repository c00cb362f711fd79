package infra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
	"testing"
)

type storeDown struct{ transient bool }

func (e storeDown) Error() string     { return "s3: 503" }
func (e storeDown) Unavailable() bool { return e.transient }

func TestClassify(t *testing.T) {
	full := fmt.Errorf("put x: %w", &fs.PathError{Op: "write", Path: "/mnt/ckpt/trials/t/.tmp-1", Err: syscall.ENOSPC})
	for _, c := range []struct {
		name      string
		err       error
		what, at  string
		isInfraOK bool
	}{
		{"ENOSPC names the directory", full, DiskFull, "/mnt/ckpt/trials/t", true},
		{"EDQUOT", &fs.PathError{Op: "write", Path: "/q/f", Err: syscall.EDQUOT}, QuotaExceeded, "/q", true},
		{"EROFS without a path", syscall.EROFS, ReadOnly, "s3://b/p", true},
		{"a store that gave up", fmt.Errorf("list: %w", storeDown{true}), StoreDown, "s3://b/p", true},
		{"a store that refused", storeDown{false}, "", "", false},
		{"a network error", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, StoreDown, "s3://b/p", true},
		{"a context's end", context.DeadlineExceeded, "", "", false},
		{"a trainer's exit", errors.New("worker 0: exit status 1"), "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(c.err, "s3://b/p")
			e, ok := Is(got)
			if ok != c.isInfraOK {
				t.Fatalf("Classify(%v) = %v: infrastructure %v, want %v", c.err, got, ok, c.isInfraOK)
			}
			if !errors.Is(got, c.err) && got != c.err {
				t.Fatalf("the cause is lost: %v", got)
			}
			if ok && (e.What != c.what || e.Where != c.at) {
				t.Fatalf("%q at %q, want %q at %q", e.What, e.Where, c.what, c.at)
			}
		})
	}
	if Classify(nil, "x") != nil {
		t.Fatal("nil is no fault")
	}
}
