// Package term is what the CLI and the driver need of a terminal: whether a stream is one
// (IsTTY: a line can be redrawn in place, a person can answer), a progress line for work over a
// second (Ticker), a drawing redrawn until what it shows is over (Watch: `status --watch`), a
// yes/no question (Confirm), and a writer that keeps a program's output from driving the
// terminal (Sanitizer: trial logs are the trainers' bytes, and an escape sequence in them could
// retitle the window, rewrite what was printed or worse), and the shells' completion scripts
// (BashCompletion, ZshCompletion).
package term
