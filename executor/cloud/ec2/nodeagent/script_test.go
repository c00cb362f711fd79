package nodeagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// The script runs the spec's extra user-data in a subshell, then execs the agent with the AMI's
// paths, quoted for the shell; an `exit` in the extra part does not keep the agent from starting.
func TestScriptRunsExtraThenAgent(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "my agent")
	os.WriteFile(agent, []byte("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"), 0o755)
	s, err := Script(ScriptConfig{AgentBin: agent, Server: "10.0.0.5:4647", GPUs: 2, Extra: "touch " + filepath.Join(dir, "extra") + "\nexit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "#!/bin/sh\n") || !strings.Contains(s, "--nomad /usr/local/bin/nomad --data-dir /var/lib/rubberband") {
		t.Fatalf("script:\n%s", s)
	}
	script := filepath.Join(dir, "user-data")
	os.WriteFile(script, []byte(s), 0o755)
	if out, err := exec.Command("/bin/sh", script).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "extra")); err != nil {
		t.Fatal("the extra user-data did not run")
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if got, want := strings.TrimSpace(string(args)), "node-agent --server 10.0.0.5:4647 --gpus 2 --nomad /usr/local/bin/nomad --data-dir /var/lib/rubberband --driver raw_exec"; got != want {
		t.Fatalf("agent args %q, want %q", got, want)
	}
	again, _ := Script(ScriptConfig{AgentBin: agent, Server: "10.0.0.5:4647", GPUs: 2, Extra: "touch " + filepath.Join(dir, "extra") + "\nexit 3"})
	if again != s {
		t.Fatal("not deterministic")
	}
	if _, err := Script(ScriptConfig{}); err == nil {
		t.Fatal("no server accepted")
	}
}

func TestClientConfigPinsInstance(t *testing.T) {
	join := nomadlocal.Join{TLS: nomadlocal.TLS{CA: "/d/tls/ca.pem", Cert: "/d/tls/client.pem", Key: "/d/tls/client-key.pem"}, ACL: true}
	c := ClientConfig(Identity{InstanceID: "i-0123456789abcdef0", Addr: "10.1.2.3"}, "/d", "10.0.0.5:4647", 4646, 8, nomadlocal.DriverDocker, join)
	for _, want := range []string{`"rb_node" = "i-0123456789abcdef0"`, `"gpus" = "8"`, `servers = ["10.0.0.5:4647"]`, `bind_addr = "10.1.2.3"`,
		`"driver.allowlist" = "docker"`, "acl { enabled = true }", `cert_file = "/d/tls/client.pem"`, "verify_server_hostname = true", "verify_https_client = true"} {
		if !strings.Contains(c, want) {
			t.Fatalf("missing %s in\n%s", want, c)
		}
	}
	// A docker node runs no raw_exec, and a real instance keeps its cloud fingerprints.
	for _, unwanted := range []string{"raw_exec", "fingerprint.denylist"} {
		if strings.Contains(c, unwanted) {
			t.Fatalf("%s in\n%s", unwanted, c)
		}
	}
}

// The credentials reach the agent in its environment, never on its command line; it writes them
// into files of its own (0600) and starts Nomad without them in its environment, which raw_exec
// tasks inherit.
func TestScriptCarriesCredentialsInTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	// The fake agent records its arguments and its environment's credentials.
	os.WriteFile(agent, []byte("#!/bin/sh\necho \"$@\" > "+filepath.Join(dir, "args")+"\nprintf %s \"$"+EnvKey+"\" > "+filepath.Join(dir, "key")+"\n"), 0o755)
	key := "-----BEGIN EC PRIVATE KEY-----\nsecret 'quoted' $HOME\n-----END EC PRIVATE KEY-----\n"
	creds := Credentials{CA: "ca pem", Cert: "cert pem", Key: key, ACL: true}
	s, err := Script(ScriptConfig{AgentBin: agent, Server: "10.0.0.5:4647", Driver: nomadlocal.DriverRawExec, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "user-data")
	os.WriteFile(script, []byte(s), 0o755)
	if out, err := exec.Command("/bin/sh", script).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if strings.Contains(string(args), "secret") || !strings.HasSuffix(strings.TrimSpace(string(args)), "--driver raw_exec --acl") {
		t.Fatalf("agent args %q", args)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "key")); string(got) != key {
		t.Fatalf("the agent got the key %q, want %q", got, key)
	}
	env := []string{"PATH=/bin", EnvCA + "=x", EnvCert + "=y", EnvKey + "=z"}
	if got := agentEnv(env); len(got) != 1 || got[0] != "PATH=/bin" {
		t.Fatalf("the Nomad agent's environment %q", got)
	}
	join, err := creds.write(filepath.Join(dir, "tls"))
	if err != nil || !join.ACL {
		t.Fatal(join, err)
	}
	for _, f := range []string{join.CA, join.Cert, join.Key} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st.Mode(), err)
		}
	}
	if b, _ := os.ReadFile(join.Key); string(b) != key {
		t.Fatalf("key file %q", b)
	}
	if _, err := (Credentials{Cert: "only"}).write(filepath.Join(dir, "half")); err == nil {
		t.Fatal("a certificate without CA and key accepted")
	}
}
