package process

import "testing"

// BenchmarkSweep is the cost a worker's exit adds when it left nothing behind: one look through
// /proc.
func BenchmarkSweep(b *testing.B) {
	r := &Runtime{}
	for b.Loop() {
		r.endStrays(selector{groups: map[int]bool{-1: true}, token: func(t string) bool { return t == "none" }})
	}
}
