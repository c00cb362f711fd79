package ui

import (
	"cmp"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// topN keeps what a stable sort by score keeps, in the input's order: the first among equal
// scores, NaN and -Inf last.
func TestTopNIsTheStableSortsHead(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		xs := make([]float64, r.IntN(60))
		for i := range xs {
			switch r.IntN(8) {
			case 0:
				xs[i] = math.NaN()
			case 1:
				xs[i] = math.Inf(-1)
			default:
				xs[i] = float64(r.IntN(6)) // many equal scores
			}
		}
		n := r.IntN(len(xs) + 2)
		idx := make([]int, len(xs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[b], xs[a]) })
		idx = idx[:min(n, len(idx))]
		slices.Sort(idx)
		want := []int{}
		for _, i := range idx {
			want = append(want, i)
		}
		pos := make([]int, len(xs))
		for i := range pos {
			pos[i] = i
		}
		got := append([]int{}, topN(pos, n, func(i int) float64 { return xs[i] })...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("top %d of %v: %v, want %v", n, xs, got, want)
		}
	}
}
