package main

import (
	"io"

	"github.com/urfave/cli/v2"
)

// printOutput writes v as JSON under -o json, else as table writes it.
func printOutput(c *cli.Context, v any, table func(io.Writer)) error {
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, v)
	}
	table(c.App.Writer)
	return nil
}
