package local

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
)

// SpotEmulation interrupts the provider's spot nodes as EC2 would, for runs and tests on one
// machine: each node lives as long as the simulator's spot model draws (spec seconds); then
// Notify hears of it (the runtime sends the node's workers SIGTERM, as the on-node wrapper does
// on EC2's notice), and Notice spec time later the node is gone (List no longer has it), unless
// the driver released it first.
type SpotEmulation struct {
	Model  *sim.Spot     // the interruption rate or lifetimes, as the plan was made with
	Notice time.Duration // spec time from the notice to the node's end
	// Seed makes the interruption times of a run repeatable: the n-th node rented gets the
	// n-th draw.
	Seed uint64
	// Notify is told of each notice: the node and what the notice says.
	Notify func(node, notice string)
}

// watchSpot schedules node n's interruption, when the provider emulates them. Callers hold p.mu.
func (p *Provider) watchSpot(n cloud.Node, index int) {
	sp := p.spot
	if sp == nil || sp.Model == nil || n.Market != cloud.Spot {
		return
	}
	life := sp.Model.UntilInterrupted(rand.New(rand.NewPCG(sp.Seed, uint64(index))))
	if math.IsInf(life, 1) {
		return
	}
	at := n.RunningAt.Add(time.Duration(life * p.timeScale * float64(time.Second)))
	if p.timers == nil {
		p.timers = map[string]clock.Timer{}
	}
	p.timers[n.ID] = p.clk.AfterFunc(at.Sub(p.clk.Now()), func() {
		p.mu.Lock()
		_, held := p.state.Nodes[n.ID]
		p.mu.Unlock()
		if !held {
			return
		}
		notice := fmt.Sprintf("spot interruption notice (emulated): node %s ends in %s", n.ID, sp.Notice)
		if sp.Notify != nil {
			sp.Notify(n.ID, notice)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.timers[n.ID] = p.clk.AfterFunc(time.Duration(float64(sp.Notice)*p.timeScale), func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if _, held := p.state.Nodes[n.ID]; held {
				delete(p.state.Nodes, n.ID)
				p.save()
			}
		})
	})
}

// unwatch stops a node's pending interruption. Callers hold p.mu.
func (p *Provider) unwatch(id string) {
	if t := p.timers[id]; t != nil {
		t.Stop()
		delete(p.timers, id)
	}
}

// Close stops every pending interruption (the nodes stay held, as a dead driver leaves them).
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.timers {
		p.unwatch(id)
	}
	return nil
}
