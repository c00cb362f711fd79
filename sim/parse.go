package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseAlloc reads an allocation as a person writes it: GPUs per stage, "32,20,12,8", brackets
// separated by ';', each stage GPUS[/NODES][@TYPE[:MARKET]][+Nod] (more nodes than the GPUs
// need: a static cluster; one of m's offers; N of the nodes on demand, in a hedged spot stage).
// Stages and brackets are numbered from 1 in errors.
func ParseAlloc(m *Model, s string) (Alloc, error) {
	var a Alloc
	for b, part := range strings.Split(s, ";") {
		var stages []StageAlloc
		for k, f := range strings.Split(part, ",") {
			f = strings.TrimSpace(f)
			f, hedge, hedged := strings.Cut(f, "+") // ...+Nod
			f, on, typed := strings.Cut(f, "@")     // G[/N][@TYPE[:MARKET]]
			gpus, nodes, hasNodes := strings.Cut(f, "/")
			g, err := strconv.Atoi(gpus)
			if err != nil || g < 1 {
				return nil, fmt.Errorf("bracket %d stage %d: %q is not a GPU count", b+1, k+1, f)
			}
			sa := StageAlloc{GPUs: g}
			if typed {
				sa.Type, sa.Market, _ = strings.Cut(on, ":")
			}
			o, ok := m.OfferIndex(sa)
			if !ok {
				return nil, fmt.Errorf("bracket %d stage %d: %q is not an instance type and market the spec offers", b+1, k+1, on)
			}
			sa.Nodes = m.Offers[o].NodesFor(g)
			if hasNodes {
				if sa.Nodes, err = strconv.Atoi(nodes); err != nil || sa.Nodes < 1 {
					return nil, fmt.Errorf("bracket %d stage %d: %q is not a node count", b+1, k+1, nodes)
				}
			}
			if hedged {
				n, ok := strings.CutSuffix(hedge, "od")
				if sa.OnDemand, err = strconv.Atoi(n); !ok || err != nil || sa.OnDemand < 1 {
					return nil, fmt.Errorf("bracket %d stage %d: %q is not a count of on-demand nodes (+Nod)", b+1, k+1, hedge)
				}
			}
			stages = append(stages, sa)
		}
		a = append(a, stages)
	}
	return a, nil
}
