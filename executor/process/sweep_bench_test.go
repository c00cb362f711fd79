package process

import "testing"

// BenchmarkSweep is the cost a worker's exit adds when it left nothing behind: one look through
// /proc.
// all: every process looked at; since: those started after the worker (its exit's sweep).
func BenchmarkSweep(b *testing.B) {
	r := &Runtime{}
	sel := selector{groups: map[int]bool{-1: true}, token: func(t string) bool { return t == "none" }}
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			r.endStrays(sel)
		}
	})
	b.Run("since", func(b *testing.B) {
		from, ok := readCursor()
		if !ok {
			b.Skip("/proc says nothing of the PIDs handed out")
		}
		sel.since = &from
		for b.Loop() {
			r.endStrays(sel)
		}
	})
}
