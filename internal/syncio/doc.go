// Package syncio is an io.Writer several goroutines may write to at once (Writer), and a
// buffer they may write while another reads it (Buffer): a process's output copied by os/exec
// beside messages of its own, a progress line drawn by a ticker.
package syncio
