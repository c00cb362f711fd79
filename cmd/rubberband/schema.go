package main

import (
	"encoding/json"
	"fmt"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "print the spec's JSON Schema, for editor completion",
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usageErr("schema takes no arguments (got %d)", c.NArg())
			}
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false) // descriptions are read by people, not pasted into HTML
			if err := enc.Encode(spec.Schema()); err != nil {
				return fmt.Errorf("write the schema: %w", err)
			}
			return nil
		},
	}
}
