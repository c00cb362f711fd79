package gang

import (
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// GangSpec is what one TRAIN run of a trial needs besides where it runs.
type GangSpec struct {
	Trial      string
	Experiment *spec.Experiment
	Params     spec.Config
	StartIter  int
	TargetIter int
}

// BuildGang lays a trial's workers out on its slots: one worker per GPU, ranks in slot order,
// rank 0's node as MASTER_ADDR. It is pure; the executor and the profiler both use it.
func BuildGang(g GangSpec, slots []placement.Slot, nodes map[string]cloud.Node) Gang {
	tr := g.Experiment.Trainer
	out := Gang{Trial: g.Trial, Command: tr.Command, Image: tr.Image, Env: tr.Env,
		CPUMHz: tr.Resources.CPUMHz, MemoryMB: tr.Resources.MemoryMB, Reuse: tr.Reuse, Dir: tr.Workdir}
	world := 0
	for _, s := range slots {
		world += len(s.GPUs)
	}
	rank := 0
	for _, s := range slots {
		node := nodes[s.Node]
		for local, gpu := range s.GPUs {
			out.Workers = append(out.Workers, Worker{Node: node, Env: trial.Env{
				TrialID: g.Trial, Experiment: g.Experiment.Name, Params: g.Params, StartIter: g.StartIter, TargetIter: g.TargetIter,
				Rank: rank, WorldSize: world, LocalRank: local, MasterAddr: nodes[slots[0].Node].Addr, GPUs: []int{gpu},
			}})
			rank++
		}
	}
	return out
}

// SpreadSlots lays g GPUs over nodes whole node first, as the profiler measures a trial on g
// GPUs: GPUs 0.. of the first node, then of the next.
func SpreadSlots(nodes []cloud.Node, g int) []placement.Slot {
	var slots []placement.Slot
	for i := 0; g > 0 && i < len(nodes); i++ {
		n := min(g, max(nodes[i].GPUs, 1))
		s := placement.Slot{Node: nodes[i].ID}
		for gpu := range n {
			s.GPUs = append(s.GPUs, gpu)
		}
		slots = append(slots, s)
		g -= n
	}
	return slots
}
