package mlp

import (
	"slices"
	"testing"
)

// Training is a function of the parameters and the seed: the search benchmark's digits
// objective relies on it to cache a configuration's state and go on from it.
func TestEpochsAreDeterministicAndLearn(t *testing.T) {
	d, err := LoadData()
	if err != nil {
		t.Fatal(err)
	}
	p := Params{LR: 0.1, Momentum: 0.9, Hidden: 32, Batch: 32}
	a, b := NewState(p.Hidden, 7), NewState(p.Hidden, 7)
	_, before := d.Evaluate(a)
	for range 3 {
		if err := d.Epoch(p, a, 7, 0, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := d.Epoch(p, b, 7, 0, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if a.Iter != 3 || !slices.Equal(a.Weights, b.Weights) {
		t.Fatalf("iter %d; the same seed trained to different weights", a.Iter)
	}
	acc, after := d.Evaluate(a)
	if after >= before || acc < 0.8 {
		t.Fatalf("3 epochs: validation loss %.3f -> %.3f, accuracy %.3f", before, after, acc)
	}
	if c := NewState(p.Hidden, 8); slices.Equal(c.Weights, NewState(p.Hidden, 7).Weights) {
		t.Fatal("another seed starts from the same weights")
	}
	if err := d.Epoch(Params{Hidden: 32, Batch: 32}, a, 7, 0, 1, nil); err == nil {
		t.Fatal("a zero learning rate trained")
	}
}

func BenchmarkEpoch(b *testing.B) {
	d, err := LoadData()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []Params{{LR: 0.1, Momentum: 0.9, Hidden: 64, Batch: 32}, {LR: 0.1, Momentum: 0.9, Hidden: 16, Batch: 128}} {
		b.Run("", func(b *testing.B) {
			st := NewState(p.Hidden, 1)
			for b.Loop() {
				d.Epoch(p, st, 1, 0, 1, nil)
			}
		})
	}
}
