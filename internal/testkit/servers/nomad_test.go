package servers

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// The helper's server and clients run a raw_exec batch job pinned to one node, and clean up.
func TestNomadRunsAPinnedJob(t *testing.T) {
	n := StartNomad(t)
	n.AddClient("node-a", 2)
	n.AddClient("node-b", 4)
	job := nomad.NewBatchJob("hello", "hello", "global", 50)
	job.Datacenters = []string{"*"}
	tg := nomad.NewTaskGroup("w", 1)
	tg.Constrain(nomad.NewConstraint("${meta.rb_node}", "=", "node-b"))
	task := nomad.NewTask("t", "raw_exec").SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "echo hi from $NOMAD_ALLOC_ID"})
	tg.AddTask(task)
	zero := 0
	tg.RestartPolicy = &nomad.RestartPolicy{Attempts: &zero}
	job.AddTaskGroup(tg)
	if _, _, err := n.Client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		allocs, _, _ := n.Client.Jobs().Allocations("hello", false, nil)
		if len(allocs) == 1 && allocs[0].ClientStatus == "complete" {
			node, _, err := n.Client.Nodes().Info(allocs[0].NodeID, nil)
			if err != nil || node.Name != "node-b" {
				t.Fatalf("ran on %v (%v), want node-b", node, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not complete: %+v", allocs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Every agent of a fleet is locked down: its HTTP API refuses plain HTTP, HTTPS without a client
// certificate of the fleet's CA, and a certificate without a token; a token without the rights
// cannot register a job; the management token can; the servers' gossip is encrypted.
func TestNomadIsLockedDown(t *testing.T) {
	n := StartNomad(t)
	n.AddClient("node-a", 1)
	ca, err := os.ReadFile(n.Fleet.Join().CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cli, err := tls.LoadX509KeyPair(n.Fleet.APIConfig("").TLSConfig.ClientCert, n.Fleet.APIConfig("").TLSConfig.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	get := func(url, name string, certs []tls.Certificate, token string) (int, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: name, Certificates: certs}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("X-Nomad-Token", token)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	server := strings.TrimPrefix(n.Addr, "https://")
	for _, a := range []struct{ what, addr, name string }{
		{"server", server, "server.global.nomad"},
		{"client agent", n.HTTPAddr("node-a"), "client.global.nomad"},
	} {
		if code, err := get("http://"+a.addr+"/v1/jobs", "", nil, n.Fleet.Token); err == nil && code == http.StatusOK {
			t.Errorf("%s: plain HTTP answered %d", a.what, code)
		}
		if code, err := get("https://"+a.addr+"/v1/jobs", a.name, nil, n.Fleet.Token); err == nil {
			t.Errorf("%s: HTTPS without a client certificate answered %d", a.what, code)
		}
		if code, err := get("https://"+a.addr+"/v1/jobs", a.name, []tls.Certificate{cli}, ""); err != nil || code != http.StatusForbidden {
			t.Errorf("%s: a certificate without a token: %d, %v; want 403", a.what, code, err)
		}
		if code, err := get("https://"+a.addr+"/v1/jobs", a.name, []tls.Certificate{cli}, n.Fleet.Token); err != nil || code != http.StatusOK {
			t.Errorf("%s: the management token: %d, %v; want 200", a.what, code, err)
		}
	}
	reader := n.Token("reader", `namespace "default" { policy = "read" }`)
	cfg := n.Fleet.APIConfig(n.Addr)
	cfg.SecretID = reader
	c, err := nomad.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	job := nomad.NewBatchJob("intruder", "intruder", "global", 50)
	job.Datacenters = []string{"*"}
	tg := nomad.NewTaskGroup("w", 1)
	tg.AddTask(nomad.NewTask("t", "raw_exec").SetConfig("command", "/bin/true"))
	job.AddTaskGroup(tg)
	if _, _, err := c.Jobs().Register(job, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a read-only token registered a job (%v)", err)
	}
	if _, _, err := c.Jobs().List(nil); err != nil {
		t.Errorf("the read-only token cannot read: %v", err)
	}
	self, err := n.Client.Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if enc := self.Stats["serf"]["encrypted"]; enc != "true" {
		t.Errorf("serf encrypted = %q", enc)
	}
}
