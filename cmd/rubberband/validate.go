package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a spec and list every problem in it",
		ArgsUsage: "SPEC",
		Description: "With sampler.warm_start it also reads the runs named there, under --root, and says what each gives\n" +
			"and which of its parameters this search space ignores.",
		Flags: []cli.Flag{rootFlag(), catalogFlag()},
		Action: func(c *cli.Context) error {
			// A spec without a profile is valid: measuring one is `profile`'s job, which is said.
			exp, _, err := loadSpec(c, c.App.ErrWriter, spec.ProfileOptional())
			if err != nil {
				return err
			}
			ws, err := rundir.ResolveWarmStart(c.String("root"), exp) // no runs to read without sampler.warm_start
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "%s:%d: %v\n", exp.File, exp.Line("sampler.warm_start"), err)
				return &driver.CodedError{Code: driver.ExitInvalid}
			}
			for _, note := range ws.Notes {
				fmt.Fprintln(c.App.Writer, note)
			}
			fmt.Fprintln(c.App.Writer, "ok: "+exp.Summary())
			if exp.MissingProfile() {
				fmt.Fprintf(c.App.Writer, "no profile yet: `rubberband profile %s` measures the trainer and names the profile in the spec; plan and run need it\n", exp.File)
			}
			return nil
		},
	}
}

// loadSpec loads the spec named by the first argument, and the bytes it parsed, with the
// command's catalog (specOptions) and the extra options. Spec problems are printed one per line
// on w and returned as exit code 2.
func loadSpec(c *cli.Context, w io.Writer, extra ...spec.Option) (*spec.Experiment, *spec.Source, error) {
	if c.NArg() != 1 {
		return nil, nil, driver.UsageError("%s needs exactly one SPEC argument (got %d)", c.Command.Name, c.NArg())
	}
	opts, err := specOptions(c)
	if err != nil {
		return nil, nil, err
	}
	return loadSpecFile(c.Args().First(), w, append(opts, extra...)...)
}

// optionalSpec loads the command's SPEC when one is given, its profile not needed (what the
// cloud's permissions are does not depend on it); nil without one.
func optionalSpec(c *cli.Context) (*spec.Experiment, error) {
	if c.NArg() > 1 {
		return nil, driver.UsageError("%s takes at most one SPEC argument (got %d)", c.Command.Name, c.NArg())
	}
	if c.NArg() == 0 {
		return nil, nil
	}
	exp, _, err := loadSpec(c, c.App.ErrWriter, spec.ProfileOptional())
	return exp, err
}

// loadSpecFile is loadSpec of the spec at path.
func loadSpecFile(path string, w io.Writer, opts ...spec.Option) (*spec.Experiment, *spec.Source, error) {
	exp, src, err := spec.LoadSource(path, opts...)
	var probs spec.Problems
	if errors.As(err, &probs) {
		for _, p := range probs {
			fmt.Fprintln(w, p)
		}
		return nil, nil, &driver.CodedError{Code: driver.ExitInvalid, Err: fmt.Errorf("%s: %s", path, format.Plural(len(probs), "problem"))}
	}
	if err != nil {
		return nil, nil, &driver.CodedError{Code: driver.ExitInvalid, Err: err}
	}
	return exp, src, nil
}
