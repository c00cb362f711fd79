package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/urfave/cli/v2"

	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
)

// regionFlag is the AWS region of the commands that talk to EC2 outside a run.
func regionFlag() cli.Flag {
	return &cli.StringFlag{Name: "region", DefaultText: "AWS_REGION, the AWS profile's, else " + rbec2.DefaultRegion,
		Usage: "the AWS region"}
}

// loadAWS is the AWS SDK's default configuration chain in --region. Credentials are the SDK's
// to find (environment, shared files, SSO, instance profile); nothing is asked of AWS yet.
func loadAWS(c *cli.Context) (aws.Config, error) {
	region := c.String("region")
	if region != "" && !rbec2.IsRegion(region) {
		return aws.Config{}, driver.UsageError("--region %q is not an AWS region such as us-east-1", region)
	}
	return rbec2.LoadConfig(c.Context, region)
}
