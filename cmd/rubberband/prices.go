package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
)

func pricesCommand() *cli.Command {
	return &cli.Command{
		Name:      "prices",
		Usage:     "what EC2 instance types cost an hour, on-demand and spot, and where each price comes from",
		ArgsUsage: "TYPE...",
		Description: "On-demand prices come from the AWS Price List API (Linux, shared tenancy), spot prices from the\n" +
			"spot price history (the latest in each availability zone). Where AWS cannot be asked (no credentials,\n" +
			"no network, access denied) or has no price, the catalog's is shown instead (the built-in one, with\n" +
			"the local catalog file's rows over it: see `rubberband catalog`), with source\n" +
			"\"catalog (offline)\" and a note saying why. Credentials come from the AWS SDK's default chain.\n" +
			"Exit codes: 2 for a name that is no instance type's, or a type AWS (answering) and the catalog both\n" +
			"do not know; 1 for a type with no price at all, as one the catalog does not know is while AWS cannot\n" +
			"be asked (it may exist): the prices found are shown first, then why each missing one is missing.",
		Flags: []cli.Flag{regionFlag(), catalogFlag(),
			&cli.StringFlag{Name: "market", Value: "all", Usage: "on-demand, spot or all"}, outputFlag()},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() == 0 {
				return driver.UsageError("prices needs at least one instance TYPE, such as p3.2xlarge")
			}
			market, err := driver.MarketOf(c.String("market"))
			if err != nil {
				return err
			}
			cfg, err := loadAWS(c)
			if err != nil {
				return err
			}
			cat, err := effectiveCatalog(c)
			if err != nil {
				return err
			}
			ps, err := rbec2.Prices(c.Context, cfg, cfg.Region, c.Args().Slice(), market, cat)
			var unknown *rbec2.UnknownTypesError
			if errors.As(err, &unknown) {
				return driver.UsageError("%v", unknown)
			}
			// Otherwise err, if any, is a type and market with no price at all: what was found is
			// shown first.
			if list := (driver.PriceList{Region: cfg.Region, Prices: append([]rbec2.Price{}, ps...)}); c.String("output") == "json" || len(ps) > 0 {
				if werr := printOutput(c, list, list.WriteTable); werr != nil {
					return werr
				}
			}
			return err
		},
	}
}
