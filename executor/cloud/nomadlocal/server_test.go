package nomadlocal_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// A real server: it answers with a leader once StartServer returns, its ACLs bootstrapped with
// the fleet's token, keeps its files in its directory (its configuration, which holds the gossip
// key, and the fleet's keys and token 0600), and is gone after Stop. Started again from the same
// directory, it is the same cluster: the same address, and the same token works.
func TestStartServer(t *testing.T) {
	bin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	dir := t.TempDir()
	fleet, err := nomadlocal.OpenFleet(filepath.Join(dir, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	o := nomadlocal.ServerOptions{Bin: bin, Dir: filepath.Join(dir, "server"), Fleet: fleet, FreePort: nomadlocal.FreePort}
	start := time.Now()
	s, err := nomadlocal.StartServer(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started, ACLs bootstrapped, in %s", time.Since(start).Round(time.Millisecond))
	defer nomadlocal.UnmountUnder(dir)
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Status().Leader()
	if err != nil || leader != s.RPC {
		s.Stop()
		t.Fatalf("leader %q (%v), want the server's RPC address %s", leader, err, s.RPC)
	}
	if tok, _, err := c.ACLTokens().Self(nil); err != nil || tok.Type != "management" {
		s.Stop()
		t.Fatalf("the fleet's token: %+v, %v", tok, err)
	}
	// It takes a Variable at once (a gang's secrets are one): its keyring is made, and the
	// probe that waited for it is gone.
	if _, _, err := c.Variables().Create(&nomad.Variable{Path: "test/first", Items: nomad.VariableItems{"k": "v"}}, nil); err != nil {
		s.Stop()
		t.Fatalf("a Variable right after StartServer: %v", err)
	}
	if vars, _, err := c.Variables().PrefixList("rubberband/", nil); err != nil || len(vars) != 0 {
		s.Stop()
		t.Fatalf("variables under rubberband/: %v (%v)", vars, err)
	}
	for _, f := range []string{"server.hcl", "server.log", "data"} {
		if _, err := os.Stat(filepath.Join(dir, "server", f)); err != nil {
			t.Error(err)
		}
	}
	secrets := []string{filepath.Join(dir, "server", "server.hcl")}
	for _, f := range []string{"ca-key.pem", "server-key.pem", "client-key.pem", "cli-key.pem", "gossip.key", "management.token"} {
		secrets = append(secrets, filepath.Join(dir, "fleet", f))
	}
	for _, f := range secrets {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", f, st.Mode(), err)
		}
	}
	if s.Log != filepath.Join(dir, "server", "server.log") {
		t.Errorf("log %s", s.Log)
	}
	if b, _ := os.ReadFile(s.Log); strings.Contains(string(b), fleet.Token) || strings.Contains(string(b), fleet.GossipKey) {
		t.Error("the server's log holds a secret")
	}
	s.Stop()
	if _, err := c.Status().Leader(); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	again, err := nomadlocal.StartServer(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	c2, _ := again.Client()
	if tok, _, err := c2.ACLTokens().Self(nil); again.Addr != s.Addr || err != nil || tok.Type != "management" {
		t.Fatalf("started again at %s (was %s): token %+v, %v", again.Addr, s.Addr, tok, err)
	}
}

// A fleet opened again is the same fleet (its CA, client certificate, gossip key and token), so
// that a resumed driver's instances join the cluster the earlier ones did.
func TestOpenFleetKeepsItsSecrets(t *testing.T) {
	dir := t.TempDir()
	a, err := nomadlocal.OpenFleet(dir)
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, _ := os.ReadFile(a.Join().Cert)
		return string(b)
	}
	cert := read()
	b, err := nomadlocal.OpenFleet(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token != b.Token || a.GossipKey != b.GossipKey || read() != cert || len(a.Token) != 36 {
		t.Fatalf("reopened: %v %v %v", a.Token == b.Token, a.GossipKey == b.GossipKey, read() == cert)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("fleet directory %v", st.Mode())
	}
}

// A server that never elects a leader is stopped when ctx ends, its whole process group with it,
// and the error says why.
func TestStartServerGivesUpWithItsContext(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-nomad")
	// The fake agent writes its PID beside its configuration ($3) and starts a child that waits.
	script := "#!/bin/sh\necho $$ > \"$(dirname \"$3\")/pid\"\nsleep 60 &\necho $! > \"$(dirname \"$3\")/child\"\nwait\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	fleet, err := nomadlocal.OpenFleet(filepath.Join(dir, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = nomadlocal.StartServer(ctx, nomadlocal.ServerOptions{Bin: bin, Dir: filepath.Join(dir, "server"), Fleet: fleet, FreePort: nomadlocal.FreePort})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatalf("gave up after %s", time.Since(start))
	}
	for _, f := range []string{"pid", "child"} {
		b, err := os.ReadFile(filepath.Join(dir, "server", f))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d still runs", f, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive says whether pid runs: a zombie (a child whose new parent does not reap it) does not.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// A fresh port taken between its pick and the agent's bind (here: held by a listener from the
// start, as a parallel test's server would hold it) does not fail the start: the agent exits on
// its bind error, and StartServer starts it again on other ports. Before, it waited a minute for
// a leader that could not come and said only "did not start".
func TestStartServerPicksOtherPortsWhenOneIsTaken(t *testing.T) {
	bin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	dir := t.TempDir()
	fleet, err := nomadlocal.OpenFleet(filepath.Join(dir, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	picks := 0
	freePort := func() (int, error) {
		picks++
		if picks == 1 {
			return takenPort, nil
		}
		return nomadlocal.FreePort()
	}
	s, err := nomadlocal.StartServer(context.Background(), nomadlocal.ServerOptions{Bin: bin, Dir: filepath.Join(dir, "server"), Fleet: fleet, FreePort: freePort})
	if err != nil {
		t.Fatal(err)
	}
	defer nomadlocal.UnmountUnder(dir)
	defer s.Stop()
	if picks != 6 {
		t.Errorf("%d ports picked, want 6: three for the try that found one taken, three for the next", picks)
	}
	if strings.HasSuffix(s.Addr, ":"+strconv.Itoa(takenPort)) {
		t.Errorf("server at %s, the taken port", s.Addr)
	}
}
