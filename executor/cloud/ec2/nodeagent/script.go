package nodeagent

import (
	"fmt"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// Default paths on the AMI (docs/ec2.md): where the image must hold the two binaries.
const (
	DefaultAgentBin = "/usr/local/bin/rubberband"
	DefaultNomadBin = "/usr/local/bin/nomad"
	DefaultDataDir  = "/var/lib/rubberband"
)

// ScriptConfig is what an instance's user-data needs; every path is one on the AMI, never on
// the driver's machine.
type ScriptConfig struct {
	AgentBin string // rubberband on the AMI (default DefaultAgentBin)
	NomadBin string // nomad on the AMI (default DefaultNomadBin)
	DataDir  string // where the agent keeps its data, one directory per instance (default DefaultDataDir)
	Server   string // the Nomad server's RPC address (host:port) the client joins
	GPUs     int
	// Extra is the spec's cluster.ec2.user_data: run before the agent, which never returns.
	Extra string
	// RunID and Watchdog, when both are set, make the agent shut the instance down after
	// Watchdog without a heartbeat of run RunID's driver in the checkpoint store that StoreEnv
	// (KEY=VALUE pairs, the worker wrapper's RB_CHECKPOINTS*, never credentials) names.
	RunID    string
	Watchdog time.Duration
	StoreEnv []string
	// Shutdown is the command that powers the instance off (default: the agent's, shutdown -h now).
	Shutdown string
	// Driver is the one task driver the node enables (default nomadlocal.DriverRawExec).
	Driver string
	// Credentials join the server: exported to the agent, never on its command line.
	Credentials Credentials
}

// Script renders the user-data: a POSIX shell script, deterministic for a given config (a
// repeated RunInstances must send exactly the first one's).
func Script(c ScriptConfig) (string, error) {
	if c.Server == "" {
		return "", fmt.Errorf("nodeagent: no Nomad server address")
	}
	if c.GPUs < 0 {
		return "", fmt.Errorf("nodeagent: negative GPU count %d", c.GPUs)
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# rubberband node: a Nomad client agent that joins the run's server.\n")
	if x := strings.TrimSpace(c.Extra); x != "" {
		// In a subshell: the spec's `exit` or `set -e` must not keep the agent from starting.
		fmt.Fprintf(&b, "(\n%s\n)\n", x)
	}
	watchdog := c.RunID != "" && c.Watchdog > 0
	if watchdog {
		// The heartbeat's store, as the worker wrapper finds it: in the environment.
		for _, kv := range c.StoreEnv {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
				return "", fmt.Errorf("nodeagent: %q is not a KEY=VALUE variable", kv)
			}
			fmt.Fprintf(&b, "export %s=%s\n", k, quote(v))
		}
	}
	b.WriteString(c.Credentials.exports())
	fmt.Fprintf(&b, "exec %s node-agent --server %s --gpus %d --nomad %s --data-dir %s --driver %s",
		quote(or(c.AgentBin, DefaultAgentBin)), quote(c.Server), c.GPUs, quote(or(c.NomadBin, DefaultNomadBin)), quote(or(c.DataDir, DefaultDataDir)),
		quote(or(c.Driver, nomadlocal.DriverRawExec)))
	if c.Credentials.ACL {
		b.WriteString(" --acl")
	}
	if watchdog {
		fmt.Fprintf(&b, " --run %s --watchdog %s", quote(c.RunID), c.Watchdog)
		if c.Shutdown != "" {
			fmt.Fprintf(&b, " --shutdown-command %s", quote(c.Shutdown))
		}
	}
	b.WriteString("\n")
	return b.String(), nil
}

// quote is s as one shell word.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
