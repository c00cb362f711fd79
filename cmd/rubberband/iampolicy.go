package main

import (
	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/urfave/cli/v2"

	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
)

func iamPolicyCommand() *cli.Command {
	return &cli.Command{
		Name:      "iam-policy",
		Usage:     "the least-privilege IAM policy of the driver (--backend ec2, prices, catalog refresh, cleanup) or of its instances",
		ArgsUsage: "[SPEC]",
		Description: "Prints the IAM policy that allows what rubberband calls on AWS, and nothing else: for the driver,\n" +
			"EC2 (terminating, opening and deleting only what carries the tag rubberband:run), the Price List and\n" +
			"Service Quotas APIs, iam:PassRole for the instance profile's role, and S3 on the checkpoint store's\n" +
			"bucket and prefix; for the instances (--for instance, the role of cluster.ec2.instance_profile), S3\n" +
			"on that prefix only. SPEC names the bucket, prefix and instance profile (its role is taken to have\n" +
			"the profile's name); without one they are placeholders (BUCKET, PREFIX, ACCOUNT_ID, INSTANCE_ROLE).\n" +
			"-o json prints the policy document itself, as `aws iam create-policy --policy-document` takes it.\n" +
			"Nothing is asked of AWS.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "for", Value: rbec2.ForDriver, Usage: "whose policy: driver, or instance (the instance profile's role)"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			who := c.String("for")
			if who != rbec2.ForDriver && who != rbec2.ForInstance {
				return driver.UsageError("--for %q is neither %s nor %s", who, rbec2.ForDriver, rbec2.ForInstance)
			}
			exp, err := optionalSpec(c)
			if err != nil {
				return err
			}
			doc, err := rbec2.Policy(who, exp)
			if err != nil {
				return driver.UsageError("%v", err)
			}
			return printOutput(c, doc, doc.WriteText)
		},
	}
}
