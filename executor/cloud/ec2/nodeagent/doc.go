// Package nodeagent is what turns an EC2 instance into a rubberband node: Script renders the
// user-data an instance boots with, and Run is what that user-data runs on the instance (the
// `rubberband node-agent` subcommand): it reads the instance's ID and address from IMDSv2, writes
// a Nomad client configuration with meta rb_node = the instance ID and its GPU count, and execs
// the Nomad agent, which joins the run's server. The instance's life is the agent's: user-data
// never returns while the node serves.
package nodeagent
