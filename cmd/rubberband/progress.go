package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rubberband-hpo/rubberband/planner"
)

// showProgress reports the planner's search once it has taken more than a second: a live line
// on a terminal, a line every five seconds elsewhere (a log, CI). It returns the function that
// stops it and clears the line.
func showProgress(w io.Writer, p *planner.Problem) func() {
	var evaluated atomic.Int64
	p.Progress = func(n int) { evaluated.Store(int64(n)) }
	stop := ticker(w, "planning", func() string { return fmt.Sprintf("%d plans simulated", evaluated.Load()) })
	return func() {
		stop()
		p.Progress = nil
	}
}

// ticker calls what every tick after the first second and shows it, prefixed by label and
// followed by the time spent: redrawn in place on a terminal every 100 ms, else printed every 5 s.
// The returned function stops it and clears the line; it waits for the last draw.
func ticker(w io.Writer, label string, what func() string) func() {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = isTTY(f)
	}
	every := 5 * time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	start := time.Now()
	quit, stopped := make(chan struct{}), make(chan struct{})
	shown := false
	go func() {
		defer close(stopped)
		first := time.NewTimer(time.Second)
		defer first.Stop()
		select {
		case <-quit:
			return
		case <-first.C:
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			line := fmt.Sprintf("%s: %s, %.0fs", label, what(), time.Since(start).Seconds())
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(w, line)
			}
			shown = true
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-stopped
			if shown && tty {
				fmt.Fprint(w, "\r\033[K")
			}
		})
	}
}
