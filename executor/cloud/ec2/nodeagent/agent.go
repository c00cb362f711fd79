package nodeagent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// Options are the node-agent's flags, as Script renders them.
type Options struct {
	Server   string // the server's RPC address
	GPUs     int
	NomadBin string
	DataDir  string
	// IMDSEndpoint overrides IMDS's address (AWS_EC2_METADATA_SERVICE_ENDPOINT, as the SDK
	// reads it): how a fake instance reaches its own metadata.
	IMDSEndpoint string
}

// Identity is what the agent learns about its instance.
type Identity struct {
	InstanceID string
	Addr       string // local-ipv4: what the agent binds and advertises
}

// Lookup reads the instance's identity from IMDSv2.
func Lookup(ctx context.Context, endpoint string) (Identity, error) {
	c := imds.New(imds.Options{Endpoint: endpoint})
	get := func(path string) (string, error) {
		out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			return "", fmt.Errorf("nodeagent: IMDS %s: %w", path, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			return "", fmt.Errorf("nodeagent: IMDS %s: %w", path, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var id Identity
	var err error
	if id.InstanceID, err = get("instance-id"); err != nil {
		return id, err
	}
	if id.Addr, err = get("local-ipv4"); err != nil {
		return id, err
	}
	return id, nil
}

// ClientConfig is the Nomad client configuration of the instance: its name and meta rb_node are
// the instance ID (what gangs are pinned by), bound and advertised on its own address (Nomad
// refuses to guess an advertise address for rpc and serf, even on a client).
func ClientConfig(id Identity, dataDir, server string, httpPort, gpus int) string {
	return nomadlocal.AgentConfig(id.InstanceID, id.Addr, dataDir, server, httpPort, gpus, true)
}

// Run looks the instance up, writes the client configuration into DataDir/<instance ID> and
// execs the Nomad agent in place of this process: stopping the instance's processes stops the
// agent, and nothing is left to wait for it.
func Run(ctx context.Context, o Options) error {
	id, err := Lookup(ctx, o.IMDSEndpoint)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.DataDir, id.InstanceID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	// A free port rather than Nomad's 4646: instances that share an address (a test's fake
	// ones on loopback) must not collide, and nothing needs to know the port in advance.
	port, err := freePort(id.Addr)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, "client.hcl")
	if err := os.WriteFile(conf, []byte(ClientConfig(id, filepath.Join(dir, "data"), o.Server, port, o.GPUs)), 0o644); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	if err := syscall.Exec(o.NomadBin, []string{o.NomadBin, "agent", "-config", conf}, os.Environ()); err != nil {
		return fmt.Errorf("nodeagent: exec %s: %w", o.NomadBin, err)
	}
	return nil
}

func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("nodeagent: free port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
