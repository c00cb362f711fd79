package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rubberband-hpo/rubberband/planner"
)

// showProgress prints a live line while the planner searches, when w is a terminal, and returns
// the function that clears it.
func showProgress(w io.Writer, p *planner.Problem) func() {
	f, ok := w.(*os.File)
	if !ok {
		return func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	start, last := time.Now(), time.Now()
	shown := false
	p.Progress = func(n int) {
		if time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		shown = true
		fmt.Fprintf(f, "\rplanning: %d plans simulated, %.1fs", n, time.Since(start).Seconds())
	}
	return func() {
		p.Progress = nil
		if shown {
			fmt.Fprint(f, "\r\033[K")
		}
	}
}
