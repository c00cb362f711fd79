package term

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// IsTTY says whether f is a terminal. The mode bits cannot tell: /dev/null is a character
// device too; only a terminal has terminal attributes.
func IsTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}

// Writes says whether w is a terminal (an *os.File that IsTTY).
func Writes(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && IsTTY(f)
}

// Confirm asks question on w and reads the answer from r: yes only for y or yes.
func Confirm(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// Ticker calls what every tick after the first second and shows it on w, prefixed by label and
// followed by the time spent: redrawn in place on a terminal every 100 ms, else printed every
// 5 s (a log, CI). The returned function stops it and clears the line; it waits for the last
// draw and may be called again.
func Ticker(w io.Writer, label string, what func() string) func() {
	tty := Writes(w)
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
