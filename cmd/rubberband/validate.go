package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a spec and list every problem in it",
		ArgsUsage: "SPEC",
		Action: func(c *cli.Context) error {
			exp, err := loadSpec(c, c.App.ErrWriter)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, summary(exp))
			return nil
		},
	}
}

// loadSpec loads the spec named by the first argument. Spec problems are printed one per line
// on w and returned as exit code 2.
func loadSpec(c *cli.Context, w io.Writer) (*spec.Experiment, error) {
	if c.NArg() != 1 {
		return nil, usageErr("%s needs exactly one SPEC argument (got %d)", c.Command.Name, c.NArg())
	}
	exp, err := spec.Load(c.Args().First())
	var probs spec.Problems
	if errors.As(err, &probs) {
		for _, p := range probs {
			fmt.Fprintln(w, p)
		}
		return nil, &exitErr{code: exitInvalid, err: fmt.Errorf("%s: %d problem(s)", c.Args().First(), len(probs))}
	}
	if err != nil {
		return nil, &exitErr{code: exitInvalid, err: err}
	}
	return exp, nil
}

// summary is the one line `validate` prints for a valid spec.
func summary(e *spec.Experiment) string {
	brackets := e.Algorithm.Brackets()
	trials, stages := 0, 0
	for _, b := range brackets {
		trials += b.Trials()
		stages += len(b.Stages)
	}
	alg := "stages"
	switch {
	case e.Algorithm.SHA != nil:
		a := e.Algorithm.SHA
		alg = fmt.Sprintf("SHA(n=%d, r=%d, R=%d, eta=%d)", a.Trials, a.MinIters, a.MaxIters, a.Eta)
	case e.Algorithm.Hyperband != nil:
		a := e.Algorithm.Hyperband
		alg = fmt.Sprintf("Hyperband(r=%d, R=%d, eta=%d)", a.MinIters, a.MaxIters, a.Eta)
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
	return fmt.Sprintf("ok: %s: %s, %d bracket(s), %d stages, %d trials, %d parameter(s); %s, %s with %d GPUs at $%.2f/h %s, up to %d nodes",
		e.Name, alg, len(brackets), stages, trials, len(params), deadline, node, e.Cluster.GPUsPerNode,
		e.Cluster.HourlyPrice(), strings.ReplaceAll(e.Cluster.Market, "-", " "), e.Cluster.MaxNodes)
}
