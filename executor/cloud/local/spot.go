package local

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
)

// SpotEmulation interrupts the provider's spot nodes as EC2 would, for runs and tests on one
// machine: each node lives as long as the simulator's spot model draws (spec seconds); then its
// notice is given (Notify hears of it, and NextNotice hands it to the driver), and Notice spec
// time later the node goes: Stop ends its gangs, saving (the runtime sends its workers SIGTERM,
// as the on-node wrapper does when EC2 takes the instance), and List no longer has it, unless the
// driver released it first. With a Notice of 0 the notice stops the gangs at once.
type SpotEmulation struct {
	Model  *sim.Spot     // the interruption rate or lifetimes, as the plan was made with
	Notice time.Duration // spec time from the notice to the node's end
	// Seed makes the interruption times of a run repeatable: the n-th node rented gets the
	// n-th draw.
	Seed uint64
	// Notify is told of each notice: the node and what the notice says.
	Notify func(node, notice string)
	// Stop ends the gangs on a node that goes, their checkpoints saved.
	Stop func(node, why string)
}

// NextNotice is the next emulated spot notice (executor.Noticer).
func (p *Provider) NextNotice(ctx context.Context) (cloud.Notice, error) {
	return p.notices.Get(ctx)
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
		stop := func() {
			if sp.Stop != nil {
				sp.Stop(n.ID, notice)
			}
		}
		if sp.Notice <= 0 {
			stop()
		} else {
			p.notices.Put(cloud.Notice{Node: n.ID, Reason: notice})
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.timers[n.ID] = p.clk.AfterFunc(time.Duration(float64(sp.Notice)*p.timeScale), func() {
			p.mu.Lock()
			_, held := p.state.Nodes[n.ID]
			p.mu.Unlock()
			if !held {
				return
			}
			if sp.Notice > 0 {
				stop() // its gangs go with it, saving
			}
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
