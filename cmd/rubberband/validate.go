package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a spec and list every problem in it",
		ArgsUsage: "SPEC",
		Action: func(c *cli.Context) error {
			exp, _, err := loadSpec(c, c.App.ErrWriter)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, "ok: "+exp.Summary())
			return nil
		},
	}
}

// loadSpec loads the spec named by the first argument, and the bytes it parsed. Spec problems
// are printed one per line on w and returned as exit code 2.
func loadSpec(c *cli.Context, w io.Writer) (*spec.Experiment, *spec.Source, error) {
	if c.NArg() != 1 {
		return nil, nil, usageErr("%s needs exactly one SPEC argument (got %d)", c.Command.Name, c.NArg())
	}
	return loadSpecFile(c.Args().First(), w)
}

// loadSpecFile is loadSpec of the spec at path.
func loadSpecFile(path string, w io.Writer) (*spec.Experiment, *spec.Source, error) {
	exp, src, err := spec.LoadSource(path)
	var probs spec.Problems
	if errors.As(err, &probs) {
		for _, p := range probs {
			fmt.Fprintln(w, p)
		}
		return nil, nil, &exitErr{code: exitInvalid, err: fmt.Errorf("%s: %s", path, format.Plural(len(probs), "problem"))}
	}
	if err != nil {
		return nil, nil, &exitErr{code: exitInvalid, err: err}
	}
	return exp, src, nil
}
