package main

import (
	"io"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/spec"
)

// defaultRoot is --root's default: the folder of runs, and of the local catalog file.
const defaultRoot = ".rubberband"

// catalogFlag names a local catalog file; the commands that take it use it over the built-in
// catalog. run does not take it: a run's spec is parsed again on resume, with the built-in
// catalog.
func catalogFlag() cli.Flag {
	return &cli.StringFlag{Name: "catalog", EnvVars: []string{"RUBBERBAND_CATALOG"},
		DefaultText: "ROOT/" + spec.LocalCatalogName + " when there is one",
		Usage:       "a local instance catalog `FILE` (written by rubberband catalog refresh), whose rows add to or replace the built-in ones"}
}

// localCatalog is the command's local catalog file and its path: --catalog, which must exist,
// else ROOT/catalog.json when there is one (--root, RUBBERBAND_ROOT or .rubberband); a nil file
// when the command takes no --catalog or there is none.
func localCatalog(c *cli.Context) (string, *spec.CatalogFile, error) {
	if !takesFlag(c, "catalog") {
		return "", nil, nil
	}
	path, f, err := spec.ReadLocalCatalog(c.String("catalog"), catalogRoot(c))
	if err != nil {
		return path, nil, driver.UsageError("%v", err)
	}
	return path, f, nil
}

// effectiveCatalog is the built-in catalog with the command's local catalog file over it.
func effectiveCatalog(c *cli.Context) (spec.InstanceCatalog, error) {
	_, f, err := localCatalog(c)
	if err != nil || f == nil {
		return spec.BuiltinCatalog(), err
	}
	return f.Catalog(), nil
}

// specOptions are how the command parses specs: with its effective catalog.
func specOptions(c *cli.Context) ([]spec.Option, error) {
	if !takesFlag(c, "catalog") {
		return nil, nil
	}
	cat, err := effectiveCatalog(c)
	if err != nil {
		return nil, err
	}
	return []spec.Option{spec.WithCatalog(cat)}, nil
}

func takesFlag(c *cli.Context, name string) bool {
	return c.Command != nil && slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), name) })
}

// catalogRoot is --root where the command has it, else RUBBERBAND_ROOT, else the default.
func catalogRoot(c *cli.Context) string {
	if r := c.String("root"); r != "" {
		return r
	}
	if r := os.Getenv("RUBBERBAND_ROOT"); r != "" {
		return r
	}
	return defaultRoot
}

func catalogCommand() *cli.Command {
	return &cli.Command{
		Name:  "catalog",
		Usage: "the instance types specs may name, their GPUs and prices, and where each comes from",
		Description: "Lists the built-in catalog with the local catalog file's rows over it: a local row replaces the\n" +
			"built-in one of its name. validate, plan, simulate, whatif and prices use the same catalog.\n" +
			"`catalog refresh` writes the local file from AWS.",
		Flags: []cli.Flag{rootFlag(), catalogFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return driver.UsageError("catalog takes no arguments (got %q); `catalog refresh` reads AWS", c.Args().First())
			}
			path, f, err := localCatalog(c)
			if err != nil {
				return err
			}
			rows := spec.EffectiveCatalog(f)
			return printOutput(c, rows, func(w io.Writer) { spec.WriteCatalog(w, path, f, rows) })
		},
		Subcommands: []*cli.Command{catalogRefreshCommand()},
	}
}

func catalogRefreshCommand() *cli.Command {
	return &cli.Command{
		Name:  "refresh",
		Usage: "read a region's GPU instance types and on-demand prices from AWS into the local catalog file",
		Description: "Reads DescribeInstanceTypes (the types with GPUs) and the Price List API (Linux, shared tenancy)\n" +
			"with the AWS SDK's default credential chain, and writes the local catalog file (--catalog, else\n" +
			"ROOT/catalog.json) atomically, mode 0600. Types AWS sells with no on-demand price are left out and\n" +
			"listed. It needs ec2:DescribeInstanceTypes and pricing:GetProducts.",
		Flags: []cli.Flag{regionFlag(), rootFlag(), catalogFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			cfg, err := loadAWS(c)
			if err != nil {
				return err
			}
			r, err := driver.RefreshCatalog(c.Context, cfg, spec.LocalCatalogPath(c.String("catalog"), catalogRoot(c)), time.Now())
			if err != nil {
				return err
			}
			return printOutput(c, r, r.WriteText)
		},
	}
}
