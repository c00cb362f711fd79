package main

import (
	"errors"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/trial/builtin"
	"github.com/urfave/cli/v2"
)

// trainerCommand runs the built-in example trainers, so that `trainer.command` can name them
// without building anything: [rubberband, trainer, mlp] or [rubberband, trainer, synthetic, ...].
// The local runtime launches the same trainers from the small rubberband-trainer binary when it
// lies beside this one.
func trainerCommand() *cli.Command {
	return &cli.Command{
		Name:            "trainer",
		Usage:           "run a built-in trainer (as a worker launched by rubberband run)",
		ArgsUsage:       "NAME [FLAGS]",
		Description:     builtin.Usage,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			err := builtin.Main(c.Context, c.Args().Slice(), c.App.ErrWriter)
			if errors.Is(err, builtin.ErrUsage) {
				return driver.UsageError("%v", err)
			}
			return err
		},
	}
}
