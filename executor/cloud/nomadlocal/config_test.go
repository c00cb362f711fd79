package nomadlocal

import (
	"strings"
	"testing"
)

// Agents are locked down and run one task driver: raw_exec for commands (docker then is not
// allowed), docker for images (raw_exec then is not enabled); a team's pool, datacenter and class
// are written when given; the server encrypts its gossip.
func TestAgentConfigs(t *testing.T) {
	join := Join{TLS: TLS{CA: "/f/ca.pem", Cert: "/f/client.pem", Key: "/f/client-key.pem"}, ACL: true}
	tls := []string{"acl { enabled = true }", "http = true", "rpc = true", `ca_file = "/f/ca.pem"`, "verify_server_hostname = true", "verify_https_client = true"}
	for _, c := range []struct {
		agent         ClientAgent
		want, unwants []string
	}{
		{RubberbandNode("rb-node-0001", "127.0.0.1", "/d", "127.0.0.1:4647", 1234, 2, DriverRawExec, join),
			append([]string{`"driver.allowlist" = "raw_exec"`, `plugin "raw_exec" { config { enabled = true } }`, `"rb_node" = "rb-node-0001"`, "fingerprint.denylist"}, tls...),
			[]string{"docker", "node_pool"}},
		{RubberbandNode("i-0123", "10.0.0.7", "/d", "10.0.0.5:4647", 1234, 2, DriverDocker, join),
			append([]string{`"driver.allowlist" = "docker"`}, tls...), []string{"raw_exec"}},
		{ClientAgent{Name: "team-1", Addr: "127.0.0.1", Server: "127.0.0.1:4647", NodePool: "gpu", Datacenter: "dc2", Class: "a100", Meta: map[string]string{"team": "ml"}},
			[]string{`node_pool = "gpu"`, `datacenter = "dc2"`, `node_class = "a100"`, `"team" = "ml"`, `"driver.allowlist" = "raw_exec"`}, []string{"tls", "acl"}},
	} {
		hcl := c.agent.HCL()
		for _, w := range c.want {
			if !strings.Contains(hcl, w) {
				t.Errorf("%s: no %s in\n%s", c.agent.Name, w, hcl)
			}
		}
		for _, u := range c.unwants {
			if strings.Contains(hcl, u) {
				t.Errorf("%s: %s in\n%s", c.agent.Name, u, hcl)
			}
		}
	}
	server := ServerAgent{DataDir: "/d", Addr: "10.0.0.5", Ports: [3]int{1, 2, 3}, TLS: join.TLS, GossipKey: "a2V5"}.HCL()
	for _, w := range append([]string{`encrypt = "a2V5"`, `bind_addr = "10.0.0.5"`, `rpc = "10.0.0.5"`}, tls...) {
		if !strings.Contains(server, w) {
			t.Errorf("server: no %s in\n%s", w, server)
		}
	}
}
