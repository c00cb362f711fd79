package runstate

import (
	"cmp"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SimEvidence turns what the run observed into the simulator's terms (spec seconds), each place's
// observations weighed by weight, and the spot nodes it held and lost until now.
func (s *State) SimEvidence(weight func(EvidenceKey) float64, now time.Time) sim.Evidence {
	ev := sim.Evidence{Iter: map[sim.IterKey]sim.Observed{}, Startup: map[int]sim.Observed{}, FirstWave: map[int]sim.Observed{}}
	scale := 1 / s.timeScale
	offer := func(key EvidenceKey) int {
		o, _ := s.Model.OfferIndex(s.Plan[key.Bracket][key.Stage])
		return o
	}
	// In a fixed order: sums of floats in map order would differ in their last bits from one run
	// to the next, and so would the forecasts journaled from them.
	keys := make([]EvidenceKey, 0, len(s.evidence))
	for key := range s.evidence {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b EvidenceKey) int {
		return cmp.Or(cmp.Compare(a.Bracket, b.Bracket), cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.gpus, b.gpus))
	})
	for _, key := range keys {
		o := s.evidence[key]
		k := sim.IterKey{Offer: offer(key), GPUs: key.gpus}
		it := ev.Iter[k]
		it.Add(o.iterSecs*scale, o.iters, weight(key))
		ev.Iter[k] = it
	}
	// A start-up is a launch's first report less the iterations in it; the first wave's go apart.
	startups := func(into map[int]sim.Observed, key EvidenceKey, secs, iters, launches float64) {
		if launches == 0 {
			return
		}
		i := offer(key)
		per := ev.Iter[sim.IterKey{Offer: i, GPUs: key.gpus}].Mean()
		if per == 0 {
			per = s.Model.Offers[i].IterLatency(key.gpus).Mean()
		}
		st := into[i]
		st.Add(max(0, secs*scale-iters*per), launches, weight(key))
		into[i] = st
	}
	for _, key := range keys {
		o := s.evidence[key]
		startups(ev.Startup, key, o.firstSecs, o.firstIters, o.launches)
		startups(ev.FirstWave, key, o.coldSecs, o.coldIters, o.coldLaunch)
	}
	ev.Interruptions = s.interruptionEvidence(now)
	return ev
}

// interruptionEvidence is, per spot offer, the spot nodes the market took and the node-seconds
// (spec time) the run held spot nodes until now: each node from its start to its interruption,
// its release, or now. The market's rate is one for the whole run: unlike latencies, it is not
// weighed by stage.
func (s *State) interruptionEvidence(now time.Time) map[int]sim.Observed {
	taken := map[string][]time.Time{} // a node ID's interruptions, in order
	for _, in := range s.interrupted {
		for _, id := range in.nodes {
			taken[id] = append(taken[id], in.at)
		}
	}
	out := map[int]sim.Observed{}
	for _, rec := range s.nodeLog {
		if rec.Node.Market != cloud.Spot {
			continue
		}
		o, ok := s.Model.OfferIndex(sim.StageAlloc{Type: rec.Node.InstanceType, Market: spec.MarketSpot})
		if !ok {
			if o, ok = s.Model.OfferIndex(sim.StageAlloc{Market: spec.MarketSpot}); !ok {
				continue
			}
		}
		end, n := now, 0.0
		if !rec.End.IsZero() {
			end = rec.End
		}
		// Its first interruption within its span: a provider may rent an ID again after its
		// release, and a notice and the node's loss are one interruption.
		for _, at := range taken[rec.Node.ID] {
			if !at.Before(rec.Up) && !at.After(end) {
				end, n = at, 1
				break
			}
		}
		obs := out[o]
		obs.Add(n, max(0, end.Sub(rec.Up).Seconds())/s.timeScale, 1)
		out[o] = obs
	}
	return out
}
