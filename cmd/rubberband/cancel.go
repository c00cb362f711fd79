package main

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/urfave/cli/v2"
)

func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "stop a run for good: its gangs are stopped and every node it holds is released",
		ArgsUsage: "RUN",
		Description: "A live driver on this host is asked to stop (SIGTERM) and waited for. When no driver is alive,\n" +
			"cancel ends the run's gangs and releases its nodes itself. A driver on another host is refused:\n" +
			"cancel it there. `resume` refuses a cancelled run unless --force.",
		Flags:        []cli.Flag{rootFlag(), &cli.DurationFlag{Name: "wait", Value: driver.CancelWait, Usage: "how long to wait for the driver to stop"}},
		BashComplete: completeRun,
		Action: func(c *cli.Context) error {
			st, err := openOneRun(c)
			if err != nil {
				return err
			}
			what, err := driver.Cancel(c.Context, st, c.Duration("wait"), c.App.ErrWriter)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, what.Said(st.Dir))
			return nil
		},
	}
}
