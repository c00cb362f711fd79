package main

import (
	"errors"
	"os"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/urfave/cli/v2"
)

// workerCommand is what a remote runtime (Nomad) runs on a node for one worker of a gang
// (package worker, which reads its own command line: the runtime writes it with Options.Args).
func workerCommand() *cli.Command {
	return &cli.Command{
		Name:            "worker",
		Usage:           "run one worker of a trial on this node (launched by the nomad runtime)",
		ArgsUsage:       "--trial ID --rank N [--gang ID] [--grace D] [--run ID] [--heartbeat-timeout D] [--timeout D] [--spot-notices] -- TRAINER [ARGS...]",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			o, err := worker.ParseArgs(c.Args().Slice(), c.App.ErrWriter)
			if errors.Is(err, worker.ErrUsage) {
				return driver.UsageError("%v", errors.Unwrap(err))
			}
			o.WorkDir, o.IMDSEndpoint = os.Getenv("NOMAD_TASK_DIR"), os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
			o.Stdin, o.Stdout, o.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
			if code := worker.Run(c.Context, o); code != 0 {
				return &driver.CodedError{Code: code}
			}
			return nil
		},
	}
}
