package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/spec/starter"
	"github.com/urfave/cli/v2"
)

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "write a starting spec for the training script in this folder",
		ArgsUsage: " ",
		Description: "Writes rubberband.yaml (or --out FILE) beside the folder's one Python script: its command, an\n" +
			"instance type with the catalog's GPUs, price and typical start-up latencies (marked as catalog\n" +
			"defaults), a search space skeleton, Successive Halving, and a deadline to edit. It has no profile:\n" +
			"`rubberband profile SPEC` measures one next. An existing file is left alone unless --force.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: starter.DefaultFile, Usage: "the spec `FILE` to write; its folder is where the script is looked for"},
			&cli.StringFlag{Name: "command", Usage: "the trainer's command, words split at spaces (default: python3 and the folder's one *.py script)"},
			&cli.StringFlag{Name: "type", Value: starter.DefaultType, Usage: "the instance `TYPE` (rubberband catalog lists them)"},
			&cli.StringFlag{Name: "name", DefaultText: "the folder's name", Usage: "the experiment's name"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite an existing spec file"},
			rootFlag(), catalogFlag(),
		},
		Action: initAction,
	}
}

func initAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return driver.UsageError("init takes no arguments (got %q): it writes --out in the current folder", c.Args().First())
	}
	out := c.String("out")
	cat, err := effectiveCatalog(c)
	if err != nil {
		return err
	}
	o := starter.Options{Type: c.String("type"), Catalog: cat, Now: time.Now(), Name: c.String("name"), Command: strings.Fields(c.String("command"))}
	var input *starter.InputError
	if o, err = starter.Init(o, out, c.Bool("force")); errors.As(err, &input) {
		return driver.UsageError("%v", input)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %s on %s, Successive Halving of 27 trials, deadline 1h (edit them there)\n",
		out, strings.Join(o.Command, " "), o.Type)
	fmt.Fprintf(c.App.Writer, "next: rubberband profile %s\n", out)
	return nil
}
