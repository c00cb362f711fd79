package nomad

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
)

// A log read again from its start is echoed once: what a read wrote before is not written again,
// what it did not reach is.
func TestEchoOnce(t *testing.T) {
	var log strings.Builder
	e := &echoOnce{w: &log}
	for _, read := range [][]string{{"a\n", "b\n"}, {"a\n", "b\n", "c\n"}, {"a\n"}, {"a\n", "b\n", "c\n", "d\n"}} {
		e.pos = 0
		for _, line := range read {
			if n, err := e.Write([]byte(line)); n != len(line) || err != nil {
				t.Fatalf("Write %q: %d, %v", line, n, err)
			}
		}
	}
	if log.String() != "a\nb\nc\nd\n" {
		t.Fatalf("echoed %q", log.String())
	}
}

// A followed log whose stream breaks is read on from the byte it reached: refused at first (the
// task not marked started yet), cut mid-line, ended; the reader sees every byte once, the first
// error is said once, and it stops when its context ends.
func TestFollowLogReadsOnWhereItBroke(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notStarted := errors.New(`task "trainer" not started yet. No logs available`)
	type answer struct {
		data []string
		err  error // ends the stream; nil: closed
		wait bool  // stays open until the context ends
	}
	answers := []answer{{err: notStarted}, {data: []string{"a\n", "b"}, err: errors.New("connection reset")}, {data: []string{"c\n"}}, {wait: true}}
	var offsets []int64
	open := func(offset int64) (<-chan *nomad.StreamFrame, <-chan error) {
		offsets = append(offsets, offset)
		a := answers[len(offsets)-1]
		errs := make(chan error, 1)
		if a.err != nil && a.data == nil {
			errs <- a.err
			return nil, errs
		}
		frames := make(chan *nomad.StreamFrame, len(a.data))
		for _, d := range a.data {
			frames <- &nomad.StreamFrame{Data: []byte(d)}
		}
		switch {
		case a.wait: // as the API's reader, closed once cancelled
			cancel()
			go func() { <-ctx.Done(); close(frames) }()
		case a.err != nil:
			errs <- a.err
		default:
			close(frames)
		}
		return frames, errs
	}
	var out strings.Builder
	var broke []error
	followLog(ctx, &out, open, 0, func(err error) { broke = append(broke, err) })
	if out.String() != "a\nbc\n" {
		t.Errorf("read %q", out.String())
	}
	if fmt.Sprint(offsets) != "[0 0 3 5]" {
		t.Errorf("opened at offsets %v, want [0 0 3 5]", offsets)
	}
	if len(broke) != 1 || broke[0] != notStarted {
		t.Errorf("said %v, want the first error once", broke)
	}
}
