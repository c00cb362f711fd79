package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/urfave/cli/v2"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:      "simulate",
		Usage:     "predict the time and cost of a given allocation plan",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(),
			&cli.StringFlag{Name: "plan", Usage: "a plan file written by `plan --out`"},
			&cli.StringFlag{Name: "gantt", Usage: "draw the cluster schedule of one sampled run (FILE.png or FILE.svg)"},
			&cli.StringFlag{Name: "hist", Usage: "draw JCT (FILE) and cost (FILE-cost) histograms, deadline marked"},
			&cli.StringFlag{Name: "alloc", Usage: "GPUs per stage, e.g. 32,20,12,8; brackets separated by ';'; GPUS/NODES holds more nodes than the GPUs need (a static cluster: 24/6,24/6); GPUS@TYPE or GPUS@TYPE:MARKET puts a stage on one of cluster.instance_types (8@p3.2xlarge:spot)"},
		),
		Action: simulateAction,
	}
}

func simulateAction(c *cli.Context) error {
	exp, s, err := prepare(c)
	if err != nil {
		return err
	}
	var alloc sim.Alloc
	name := "given"
	switch {
	case c.IsSet("plan") == c.IsSet("alloc"):
		return usageErr("give exactly one of --plan FILE or --alloc LIST")
	case c.IsSet("plan"):
		f, err := os.Open(c.String("plan"))
		if err != nil {
			return usageErr("open plan: %v", err)
		}
		defer f.Close()
		rep, err := planner.ReadReport(f)
		if err != nil {
			return usageErr("%v", err)
		}
		if alloc, err = rep.Alloc(s.Brackets()); err != nil {
			return usageErr("%s: %v", c.String("plan"), err)
		}
		name = rep.Planner
	default:
		if alloc, err = parseAlloc(s.Model(), c.String("alloc")); err != nil {
			return usageErr("--alloc: %v", err)
		}
	}
	if err := s.Model().Check(s.Brackets(), alloc); err != nil {
		return usageErr("%v", err)
	}
	res, err := s.Simulate(alloc)
	if err != nil {
		return err
	}
	deadline := exp.Deadline.Seconds()
	feasible := deadline == 0 || sim.Quantile(res.Outcome.JCT, exp.Planner.DeadlineQuantile) <= deadline
	if g := c.String("gantt"); g != "" {
		if err := drawGantt(g, s, alloc, exp.Name+": cluster schedule, one sampled run"); err != nil {
			return err
		}
	}
	if h := c.String("hist"); h != "" {
		if err := drawHistograms(h, res, deadline, exp.Name); err != nil {
			return err
		}
	}
	rep := planner.NewReport(exp, name, deadline, feasible, res)
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, rep)
	}
	printReport(c.App.Writer, rep)
	return nil
}

// parseAlloc reads "32,20,12,8" (GPUs per stage) with brackets separated by ';' and an optional
// "/NODES" per stage.
func parseAlloc(m *sim.Model, s string) (sim.Alloc, error) {
	var a sim.Alloc
	for b, part := range strings.Split(s, ";") {
		var stages []sim.StageAlloc
		for k, f := range strings.Split(part, ",") {
			f = strings.TrimSpace(f)
			f, on, typed := strings.Cut(f, "@") // G[/N][@TYPE[:MARKET]]
			gpus, nodes, hasNodes := strings.Cut(f, "/")
			g, err := strconv.Atoi(gpus)
			if err != nil || g < 1 {
				return nil, fmt.Errorf("bracket %d stage %d: %q is not a GPU count", b, k, f)
			}
			sa := sim.StageAlloc{GPUs: g}
			if typed {
				sa.Type, sa.Market, _ = strings.Cut(on, ":")
			}
			o, ok := m.OfferIndex(sa)
			if !ok {
				return nil, fmt.Errorf("bracket %d stage %d: %q is not an instance type and market the spec offers", b, k, on)
			}
			sa.Nodes = m.Offers[o].NodesFor(g)
			if hasNodes {
				if sa.Nodes, err = strconv.Atoi(nodes); err != nil || sa.Nodes < 1 {
					return nil, fmt.Errorf("bracket %d stage %d: %q is not a node count", b, k, nodes)
				}
			}
			stages = append(stages, sa)
		}
		a = append(a, stages)
	}
	return a, nil
}
