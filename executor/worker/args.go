package worker

import (
	"errors"
	"flag"
	"io"
	"strconv"
)

// Args is the command line that gives a worker o (but its I/O and work directory): what a
// runtime puts after `rubberband worker`, and ParseArgs reads.
func (o Options) Args() []string {
	args := []string{"--trial", o.Trial, "--rank", strconv.Itoa(o.Rank)}
	if o.Gang != "" {
		args = append(args, "--gang", o.Gang)
	}
	if o.Grace > 0 {
		args = append(args, "--grace", o.Grace.String())
	}
	if o.RunID != "" {
		args = append(args, "--run", o.RunID)
	}
	if o.HeartbeatTimeout > 0 {
		args = append(args, "--heartbeat-timeout", o.HeartbeatTimeout.String())
	}
	if o.Timeout > 0 {
		args = append(args, "--timeout", o.Timeout.String())
	}
	if o.SpotNotices {
		args = append(args, "--spot-notices")
	}
	if o.Node != "" {
		args = append(args, "--node", o.Node)
	}
	if o.Lead > 0 {
		args = append(args, "--notice-lead", o.Lead.String())
	}
	if o.SpotPoll > 0 {
		args = append(args, "--spot-poll", o.SpotPoll.String())
	}
	if o.Code != "" {
		args = append(args, "--code", o.Code)
	}
	return append(append(args, "--"), o.Command...)
}

// ErrUsage matches a command line ParseArgs cannot read; its usage is written to the io.Writer
// ParseArgs was given.
var ErrUsage = errors.New("bad worker command line")

// ParseArgs reads the command line Args writes (flags, then -- and the trainer's command);
// usage, on a bad one or -h, goes to w.
func ParseArgs(args []string, w io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("rubberband worker", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&o.Trial, "trial", "", "the trial's ID (required)")
	fs.IntVar(&o.Rank, "rank", -1, "the worker's rank in its gang (required)")
	fs.StringVar(&o.Gang, "gang", "", "the ID of this launch of the trial, shared by its workers (the Nomad job)")
	fs.DurationVar(&o.Grace, "grace", 0, "how long the trainer has after SIGTERM before it is killed (default trial.GracePeriod)")
	fs.StringVar(&o.RunID, "run", "", "the run's ID: watch its driver's heartbeat in the checkpoint store")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", 0, "stop the trainer after this long without a heartbeat from the driver (default heartbeat.DefaultTimeout)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "stop the trainer after this long (the launch's deadline; 0: none)")
	fs.BoolVar(&o.SpotNotices, "spot-notices", false, "watch this EC2 spot instance's IMDSv2 for an interruption notice, and stop the trainer (saving its checkpoint) when one comes (with --run and --node: shortly before EC2 acts, the driver told)")
	fs.StringVar(&o.Node, "node", "", "the node's ID as the driver knows it: with --run, a spot notice is given to the driver, and the trainer trains through it")
	fs.DurationVar(&o.Lead, "notice-lead", 0, "training through a notice, stop the trainer this long before EC2 acts (default the grace and 30s)")
	fs.DurationVar(&o.SpotPoll, "spot-poll", 0, "how often IMDS is asked for a notice (default 1s; AWS gives two minutes' notice)")
	fs.StringVar(&o.Code, "code", "", "the ID of the trainer's code bundle: fetched from the checkpoint store (once per node), unpacked, and the trainer run in it")
	if err := fs.Parse(args); err != nil {
		return o, errors.Join(ErrUsage, err)
	}
	o.Command = fs.Args()
	switch {
	case o.Trial == "" || o.Rank < 0:
		fs.Usage()
		return o, errors.Join(ErrUsage, errors.New("--trial and --rank are required"))
	case len(o.Command) == 0:
		return o, errors.Join(ErrUsage, errors.New("worker needs the trainer command after --"))
	}
	return o, nil
}
