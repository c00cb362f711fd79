package main

import (
	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "print the spec's JSON Schema, for editor completion",
		Description: "cluster.instance_type lists the built-in catalog's types and, where there is one, the local\n" +
			"catalog file's (--catalog, else ROOT/catalog.json, as `rubberband catalog` shows).",
		Flags: []cli.Flag{rootFlag(), catalogFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return driver.UsageError("schema takes no arguments (got %d)", c.NArg())
			}
			cat, err := effectiveCatalog(c)
			if err != nil {
				return err
			}
			return spec.WriteSchema(c.App.Writer, cat)
		},
	}
}
