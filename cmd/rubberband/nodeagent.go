package main

import (
	"os"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/urfave/cli/v2"
)

// nodeAgentCommand is what an EC2 node's user-data runs (nodeagent.Script): not for people.
func nodeAgentCommand() *cli.Command {
	return &cli.Command{
		Name:   "node-agent",
		Usage:  "on an EC2 instance: start the Nomad client that makes it a rubberband node",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "server", Required: true, Usage: "the Nomad server's RPC address"},
			&cli.IntFlag{Name: "gpus", Usage: "the node's GPUs (meta gpus)"},
			&cli.StringFlag{Name: "nomad", Value: nodeagent.DefaultNomadBin, Usage: "the nomad binary"},
			&cli.StringFlag{Name: "data-dir", Value: nodeagent.DefaultDataDir, Usage: "the agent's data, one directory per instance"},
		},
		Action: func(c *cli.Context) error {
			return nodeagent.Run(c.Context, nodeagent.Options{Server: c.String("server"), GPUs: c.Int("gpus"), NomadBin: c.String("nomad"),
				DataDir: c.String("data-dir"), IMDSEndpoint: os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")})
		},
	}
}
