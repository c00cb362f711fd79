package term

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"
)

// Watch writes what render draws, again every interval until render says what it shows is no
// longer live or ctx ends. On a terminal each drawing clears the screen and replaces the last;
// elsewhere (a log, a pipe) a drawing is written only when it changed, after a blank line when
// blank is true.
func Watch(ctx context.Context, w io.Writer, interval time.Duration, blank bool, render func() (out []byte, live bool, err error)) error {
	redraw := Writes(w)
	var last []byte
	for {
		out, live, err := render()
		if err != nil {
			return err
		}
		switch {
		case redraw:
			fmt.Fprintf(w, "\033[H\033[2J%s", out)
		case !bytes.Equal(out, last): // a log or a pipe gets each new state once
			if last != nil && blank {
				fmt.Fprintln(w)
			}
			w.Write(out)
		}
		last = out
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
