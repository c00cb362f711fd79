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
		ArgsUsage: "[SCRIPT]",
		Description: "Writes rubberband.yaml (or --out FILE) beside the folder's one Python script, or beside\n" +
			"SCRIPT when named: its command, an instance type with the catalog's GPUs, price and typical\n" +
			"start-up latencies (marked as catalog defaults), a search space skeleton, Successive Halving, and a\n" +
			"deadline to edit. It has no profile: `rubberband profile SPEC` measures one next. An existing file\n" +
			"is left alone unless --force.",
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
	if c.NArg() > 1 {
		return driver.UsageError("init takes at most one SCRIPT (got %d arguments)", c.NArg())
	}
	out := c.String("out")
	if !c.IsSet("out") && c.NArg() == 1 {
		out = "" // beside the script
	}
	cat, err := effectiveCatalog(c)
	if err != nil {
		return err
	}
	o := starter.Options{Type: c.String("type"), Catalog: cat, Now: time.Now(), Name: c.String("name"), Command: strings.Fields(c.String("command")), Script: c.Args().First()}
	var input *starter.InputError
	if o, out, err = starter.Init(o, out, c.Bool("force")); errors.As(err, &input) {
		return driver.UsageError("%v", input)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s: %s on %s, Successive Halving of 27 trials, deadline 1h (edit them there)\n",
		out, strings.Join(o.Command, " "), o.Type)
	fmt.Fprintf(c.App.Writer, "next: rubberband profile %s\n", out)
	return nil
}
