package nodeagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if got, want := strings.TrimSpace(string(args)), "node-agent --server 10.0.0.5:4647 --gpus 2 --nomad /usr/local/bin/nomad --data-dir /var/lib/rubberband"; got != want {
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
	c := ClientConfig(Identity{InstanceID: "i-0123456789abcdef0", Addr: "10.1.2.3"}, "/d", "10.0.0.5:4647", 4646, 8)
	for _, want := range []string{`rb_node = "i-0123456789abcdef0"`, `gpus = "8"`, `servers = ["10.0.0.5:4647"]`, `bind_addr = "10.1.2.3"`} {
		if !strings.Contains(c, want) {
			t.Fatalf("missing %s in\n%s", want, c)
		}
	}
}
