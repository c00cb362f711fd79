package local

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Nodes come up after the (scaled) scale and init latencies, are billed from the end of the
// scale latency, and survive in the state file for a resumed driver.
func TestCreateListDeletePersist(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nodes.json")
	cfg := Config{StateFile: file, GPUsPerNode: 4, Scale: sim.Constant(20), Init: sim.Constant(10), TimeScale: 0.01, Rand: spec.NewRand(1, 1)}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nodes, err := p.Create(context.Background(), 3)
	if err != nil || len(nodes) != 3 {
		t.Fatal(nodes, err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("create took %v, want at least the 0.3 s of scaled latency", el)
	}
	if run := nodes[0].RunningAt.Sub(start); run < 200*time.Millisecond || run > 280*time.Millisecond {
		t.Fatalf("billing starts %v after the request, want the 0.2 s scale latency", run)
	}
	if err := p.Delete(context.Background(), []string{nodes[1].ID, "unknown"}); err != nil {
		t.Fatal(err)
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	held, _ := again.List(context.Background())
	if len(held) != 2 || held[0].ID != nodes[0].ID || held[1].ID != nodes[2].ID || held[0].GPUs != 4 {
		t.Fatalf("a new provider sees %+v", held)
	}
	more, _ := again.Create(context.Background(), 1)
	if more[0].ID == nodes[0].ID || more[0].ID == nodes[2].ID {
		t.Fatalf("node ID %s reused", more[0].ID)
	}
}

func TestCreateCancelled(t *testing.T) {
	p, _ := New(Config{StateFile: filepath.Join(t.TempDir(), "n.json"), GPUsPerNode: 1, Scale: sim.Constant(100), Init: sim.Constant(0), TimeScale: 1, Rand: spec.NewRand(1, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Create(ctx, 1); err == nil {
		t.Fatal("create outlived its context")
	}
	if held, _ := p.List(context.Background()); len(held) != 0 {
		t.Fatalf("a cancelled create left %v", held)
	}
}
