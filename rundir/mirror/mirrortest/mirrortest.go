// Package mirrortest is the contract every mirror.Store meets, run by each implementation's
// tests: Run(t, open).
package mirrortest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir/mirror"
)

// Run runs the contract over stores open returns, each empty and the test's own.
func Run(t *testing.T, open func(t *testing.T) mirror.Store) {
	cases := []struct {
		name string
		fn   func(*testing.T, mirror.Store)
	}{
		{"PutReadListDelete", putReadListDelete},
		{"AppendAtTheEndOnly", appendAtTheEndOnly},
		{"ReadFromAnOffset", readFromAnOffset},
		{"RunsApart", runsApart},
		{"BadNames", badNames},
		{"OneOfRacingAppendsWins", racingAppends},
		{"BinaryAndLarge", binaryAndLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

const run = "teams/ml/20261126-aaaa"

func read(t *testing.T, s mirror.Store, run, name string) string {
	t.Helper()
	b, err := s.Read(context.Background(), run, name, 0)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func list(t *testing.T, s mirror.Store, run string) string {
	t.Helper()
	files, err := s.List(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(files)
}

func putReadListDelete(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	if got := list(t, s, run); got != "[]" {
		t.Fatalf("a new store lists %s", got)
	}
	if _, err := s.Read(ctx, run, "plan.json", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading a missing file: %v, want fs.ErrNotExist", err)
	}
	for _, f := range []struct{ name, data string }{{"spec.yaml", "name: x\n"}, {"plan.json", "{}"}, {"logs/t1.log", "one\n"}, {"cancel", ""}} {
		if err := s.Put(ctx, run, f.name, []byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, run, "plan.json", []byte(`{"stages":2}`)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s, run, "plan.json"); got != `{"stages":2}` {
		t.Errorf("a second Put: %q", got)
	}
	if got, want := list(t, s, run), "[{cancel 0} {logs/t1.log 4} {plan.json 12} {spec.yaml 8}]"; got != want {
		t.Errorf("list %s, want %s", got, want)
	}
	if err := s.Delete(ctx, run, "cancel"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, run, "cancel"); err != nil {
		t.Errorf("deleting a missing file: %v", err)
	}
	if got, want := list(t, s, run), "[{logs/t1.log 4} {plan.json 12} {spec.yaml 8}]"; got != want {
		t.Errorf("after Delete: list %s, want %s", got, want)
	}
}

func appendAtTheEndOnly(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	if err := s.Append(ctx, run, "journal.jsonl", 3, []byte("x")); !errors.Is(err, mirror.ErrConflict) {
		t.Fatalf("append at 3 to a missing file: %v, want ErrConflict", err)
	}
	if err := s.Append(ctx, run, "journal.jsonl", 0, []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, run, "journal.jsonl", 2, []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{0, 2, 5} {
		if err := s.Append(ctx, run, "journal.jsonl", at, []byte("stale\n")); !errors.Is(err, mirror.ErrConflict) {
			t.Errorf("append at %d to a 4-byte file: %v, want ErrConflict", at, err)
		}
	}
	if got := read(t, s, run, "journal.jsonl"); got != "a\nb\n" {
		t.Errorf("journal %q after refused appends, want %q", got, "a\nb\n")
	}
	if err := s.Put(ctx, run, "journal.jsonl", []byte("whole")); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, run, "journal.jsonl", 5, []byte("+")); err != nil {
		t.Fatalf("append after Put: %v", err)
	}
	if got := read(t, s, run, "journal.jsonl"); got != "whole+" {
		t.Errorf("journal %q, want %q", got, "whole+")
	}
	if got, want := list(t, s, run), "[{journal.jsonl 6}]"; got != want {
		t.Errorf("list %s, want %s", got, want)
	}
}

func readFromAnOffset(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	for i, part := range []string{"0123", "4567", "89"} {
		if err := s.Append(ctx, run, "driver.log", int64(4*i), []byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	for at, want := range map[int64]string{0: "0123456789", 3: "3456789", 4: "456789", 9: "9", 10: "", 99: ""} {
		b, err := s.Read(ctx, run, "driver.log", at)
		if err != nil || string(b) != want {
			t.Errorf("read at %d: %q, %v; want %q", at, b, err, want)
		}
	}
}

func runsApart(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	other := "teams/ml/20261126-bbbb"
	if err := s.Put(ctx, run, "run.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, other, "journal.jsonl", 0, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, s, run), "[{run.json 1}]"; got != want {
		t.Errorf("run a lists %s, want %s", got, want)
	}
	if got, want := list(t, s, other), "[{journal.jsonl 1}]"; got != want {
		t.Errorf("run b lists %s, want %s", got, want)
	}
	if _, err := s.Read(ctx, other, "run.json", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("run b reads run a's file: %v", err)
	}
}

func badNames(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	for _, name := range []string{"", "../x", "/etc/passwd", "a/../../b", "./a", "a//b", "a\\b", "logs/"} {
		if err := s.Put(ctx, run, name, []byte("x")); !errors.Is(err, mirror.ErrInvalid) {
			t.Errorf("Put %q: %v, want ErrInvalid", name, err)
		}
		if err := s.Append(ctx, run, name, 0, []byte("x")); !errors.Is(err, mirror.ErrInvalid) {
			t.Errorf("Append %q: %v, want ErrInvalid", name, err)
		}
		if _, err := s.Read(ctx, run, name, 0); !errors.Is(err, mirror.ErrInvalid) {
			t.Errorf("Read %q: %v, want ErrInvalid", name, err)
		}
		if _, err := s.List(ctx, name); !errors.Is(err, mirror.ErrInvalid) && name != "logs/" {
			t.Errorf("List %q: %v, want ErrInvalid", name, err)
		}
	}
	if got := list(t, s, run); got != "[]" {
		t.Errorf("bad names left %s", got)
	}
}

// Two drivers of one run (a server that lost its lease and does not know yet) race to append
// their next records at the same offset: one wins, the others are told, nothing interleaves.
func racingAppends(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	if err := s.Append(ctx, run, "journal.jsonl", 0, []byte("start\n")); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Append(ctx, run, "journal.jsonl", 6, []byte(fmt.Sprintf("driver %d\n", i)))
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("drivers %d and %d both appended at 6", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, mirror.ErrConflict):
			t.Errorf("driver %d: %v, want ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no append won")
	}
	if got, want := read(t, s, run, "journal.jsonl"), fmt.Sprintf("start\ndriver %d\n", won); got != want {
		t.Errorf("journal %q, want %q", got, want)
	}
}

func binaryAndLarge(t *testing.T, s mirror.Store) {
	ctx := context.Background()
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := s.Put(ctx, run, "logs/big.log", big[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, run, "logs/big.log", 1<<20, big[1<<20:]); err != nil {
		t.Fatal(err)
	}
	b, err := s.Read(ctx, run, "logs/big.log", 0)
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("3 MiB read back: %d bytes, equal %v, %v", len(b), bytes.Equal(b, big), err)
	}
	if err := s.Put(ctx, run, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, run, "empty", 0); err != nil || len(b) != 0 {
		t.Errorf("an empty file: %q, %v", b, err)
	}
}
