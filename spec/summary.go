package spec

import (
	"fmt"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// Summary is the experiment in one line, what `rubberband validate` prints for a valid spec:
// its algorithm, stages, trials and parameters, its deadline and its cluster.
func (e *Experiment) Summary() string {
	brackets := e.Algorithm.Brackets()
	trials, stages := 0, 0
	for _, b := range brackets {
		trials += b.Trials()
		stages += len(b.Stages)
	}
	alg, stage := "stages", "stage"
	switch {
	case e.Algorithm.ASHA != nil:
		a := e.Algorithm.ASHA
		alg, stage = fmt.Sprintf("ASHA(n=%d, r=%d, R=%d, eta=%d)", a.Trials, a.MinIters, a.MaxIters, a.Eta), "rung"
		trials = a.Trials // each trial climbs the rungs it is promoted to: counted once
	case e.Algorithm.SHA != nil:
		a := e.Algorithm.SHA
		alg = fmt.Sprintf("SHA(n=%d, r=%d, R=%d, eta=%d)", a.Trials, a.MinIters, a.MaxIters, a.Eta)
	case e.Algorithm.Hyperband != nil:
		a := e.Algorithm.Hyperband
		alg = fmt.Sprintf("Hyperband(r=%d, R=%d, eta=%d)", a.MinIters, a.MaxIters, a.Eta)
		if a.Rounds > 1 {
			alg = fmt.Sprintf("%d rounds of %s", a.Rounds, alg)
		}
	}
	node := e.Cluster.InstanceType
	if node == "" {
		node = "node"
	}
	deadline := "no deadline"
	if e.Deadline > 0 {
		deadline = "deadline " + e.Deadline.D().String()
	}
	var params []string
	for name := range e.SearchSpace {
		params = append(params, name)
	}
	line := fmt.Sprintf("%s: %s, %s, %s, %s, %s; %s, %s with %s at %s/h %s, up to %s",
		e.Name, alg, format.Plural(len(brackets), "bracket"), format.Plural(stages, stage), format.Plural(trials, "trial"), format.Plural(len(params), "parameter"),
		deadline, node, format.Plural(e.Cluster.GPUsPerNode, "GPU"), format.Money(e.Cluster.HourlyPrice()), strings.ReplaceAll(e.Cluster.Market, "-", " "),
		format.Plural(e.Cluster.MaxNodes, "node"))
	if e.MultiObjective() { // what ranks results, when it is more than one metric
		var objs []string
		for _, o := range e.Objectives {
			objs = append(objs, o.Metric+" ("+o.Mode+")")
		}
		line += "; Pareto front of " + strings.Join(objs, ", ")
		if n := len(e.Constraints); n > 0 {
			line += " under " + format.Plural(n, "constraint")
		}
	}
	return line
}
