package main

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/urfave/cli/v2"
)

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "SHELL",
		Description: "Load it in the current shell, e.g. `source <(rubberband completion bash)`,\n" +
			"or for good: `rubberband completion fish > ~/.config/fish/completions/rubberband.fish`.",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return driver.UsageError("completion needs one SHELL argument: bash, zsh or fish")
			}
			switch sh := c.Args().First(); sh {
			case "bash", "zsh":
				fmt.Fprint(c.App.Writer, map[string]string{"bash": term.BashCompletion, "zsh": term.ZshCompletion}[sh])
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return fmt.Errorf("fish completion: %w", err)
				}
				fmt.Fprint(c.App.Writer, script)
			default:
				return driver.UsageError("%q is not a shell this prints completion for (bash, zsh or fish)", sh)
			}
			return nil
		},
	}
}
