package nomadlocal

import (
	"fmt"
	"slices"
	"strings"
)

// Task drivers a client agent enables: one, the one the spec's trainer needs (raw_exec for
// trainer.command, docker for trainer.image), so that a node runs nothing else.
const (
	DriverRawExec = "raw_exec"
	DriverDocker  = "docker"
)

// Join is how a client agent joins its cluster: mutual TLS with the cluster's CA and a client
// certificate (all empty: a cluster without TLS, a team's choice), the server's certificate
// checked to be one for ServerName, not merely one of the CA's (a client's could pose as a
// server); and whether the cluster enforces ACLs.
type Join struct {
	TLS
	ACL bool
}

// ClientAgent is the configuration of a client agent.
type ClientAgent struct {
	Name     string // the node's name
	Addr     string // bound and advertised (Nomad refuses to guess rpc and serf advertise addresses, even on a client)
	DataDir  string
	Server   string // the server's RPC address
	HTTPPort int
	Meta     map[string]string
	// NodePool, Datacenter and Class are a team's (empty: Nomad's defaults).
	NodePool, Datacenter, Class string
	Driver                      string // DriverRawExec (the default) or DriverDocker
	// CloudFingerprints keeps the cloud fingerprinters, which wait on metadata services a
	// local agent has none of.
	CloudFingerprints bool
	Join              Join
}

// RubberbandNode is the configuration of a client agent that is a rubberband node: named
// name, which its rb_node meta repeats (gangs are pinned by it), with its GPU count in meta.
func RubberbandNode(name, addr, dataDir, server string, httpPort, gpus int, driver string, join Join) ClientAgent {
	return ClientAgent{Name: name, Addr: addr, DataDir: dataDir, Server: server, HTTPPort: httpPort,
		Meta: map[string]string{"rb_node": name, "gpus": fmt.Sprint(gpus)}, Driver: driver, Join: join}
}

// HCL is the agent's configuration file.
func (c ClientAgent) HCL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\ndata_dir = %q\nbind_addr = %q\nlog_level = \"WARN\"\ndisable_update_check = true\n", c.Name, c.DataDir, c.Addr)
	if c.Datacenter != "" {
		fmt.Fprintf(&b, "datacenter = %q\n", c.Datacenter)
	}
	fmt.Fprintf(&b, "ports { http = %d }\nclient {\n  enabled = true\n  servers = [%q]\n", c.HTTPPort, c.Server)
	if c.NodePool != "" {
		fmt.Fprintf(&b, "  node_pool = %q\n", c.NodePool)
	}
	if c.Class != "" {
		fmt.Fprintf(&b, "  node_class = %q\n", c.Class)
	}
	b.WriteString("  meta {\n")
	keys := make([]string, 0, len(c.Meta))
	for k := range c.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "    %q = %q\n", k, c.Meta[k])
	}
	driver := c.Driver
	if driver == "" {
		driver = DriverRawExec
	}
	fmt.Fprintf(&b, "  }\n  options {\n    \"driver.allowlist\" = %q\n", driver)
	if !c.CloudFingerprints {
		b.WriteString("    \"fingerprint.denylist\" = \"env_aws,env_gce,env_azure,env_digitalocean\"\n")
	}
	fmt.Fprintf(&b, "  }\n}\nadvertise {\n  http = %q\n  rpc = %q\n  serf = %q\n}\n", c.Addr, c.Addr, c.Addr)
	if driver == DriverRawExec {
		b.WriteString("plugin \"raw_exec\" { config { enabled = true } }\n")
	}
	b.WriteString(c.Join.hcl())
	return b.String()
}

// hcl is the acl and tls blocks of an agent that joins this way.
func (j Join) hcl() string {
	var b strings.Builder
	if j.ACL {
		b.WriteString("acl { enabled = true }\n")
	}
	if j.Cert != "" {
		fmt.Fprintf(&b, "tls {\n  http = true\n  rpc = true\n  ca_file = %q\n  cert_file = %q\n  key_file = %q\n  verify_server_hostname = true\n  verify_https_client = true\n}\n",
			j.CA, j.Cert, j.Key)
	}
	return b.String()
}

// ServerAgent is the configuration of a one-server cluster, with heartbeats short enough that
// a lost node is noticed within seconds, locked down: mutual TLS on HTTP and RPC, ACLs, and its
// gossip encrypted.
type ServerAgent struct {
	DataDir string
	Addr    string // bound and advertised
	Ports   [3]int // http, rpc, serf
	TLS     TLS
	// GossipKey encrypts serf (base64): a secret, so the file that holds it is 0600.
	GossipKey string
}

// HCL is the agent's configuration file.
func (s ServerAgent) HCL() string {
	return fmt.Sprintf(`name = "rb-server"
data_dir = %q
bind_addr = %q
log_level = "WARN"
disable_update_check = true
ports {
  http = %d
  rpc = %d
  serf = %d
}
server {
  enabled = true
  bootstrap_expect = 1
  heartbeat_grace = "2s"
  min_heartbeat_ttl = "1s"
  encrypt = %q
}
advertise {
  http = %q
  rpc = %q
  serf = %q
}
`, s.DataDir, s.Addr, s.Ports[0], s.Ports[1], s.Ports[2], s.GossipKey, s.Addr, s.Addr, s.Addr) +
		Join{TLS: s.TLS, ACL: true}.hcl()
}
