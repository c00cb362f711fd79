package main

import (
	"os"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
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
			&cli.StringFlag{Name: "run", Usage: "the run's ID: watch its driver's heartbeat in the checkpoint store (RB_CHECKPOINTS*)"},
			&cli.DurationFlag{Name: "watchdog", Usage: "with --run: shut the instance down after this long without a heartbeat"},
			&cli.StringFlag{Name: "shutdown-command", Value: strings.Join(nodeagent.DefaultShutdown, " "), Usage: "what powers the instance off"},
			&cli.StringFlag{Name: "driver", Value: nomadlocal.DriverRawExec, Usage: "the one task driver the Nomad client enables (raw_exec or docker)"},
			&cli.BoolFlag{Name: "acl", Usage: "the cluster enforces ACLs"},
		},
		Action: func(c *cli.Context) error {
			o := nodeagent.Options{Server: c.String("server"), GPUs: c.Int("gpus"), NomadBin: c.String("nomad"),
				DataDir: c.String("data-dir"), IMDSEndpoint: os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
				RunID: c.String("run"), Watchdog: c.Duration("watchdog"), Shutdown: strings.Fields(c.String("shutdown-command")),
				Driver: c.String("driver"), Credentials: nodeagent.CredentialsFromEnv(os.Getenv, c.Bool("acl"))}
			o, err := nodeagent.WatchFromEnv(c.Context, o)
			if err != nil {
				return err
			}
			return nodeagent.Run(c.Context, o)
		},
	}
}
