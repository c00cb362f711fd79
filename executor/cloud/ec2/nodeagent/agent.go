package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
)

// Options are the node-agent's flags, as Script renders them, and the credentials its
// environment carries.
type Options struct {
	Server   string // the server's RPC address
	GPUs     int
	NomadBin string
	DataDir  string
	// Driver is the one task driver the Nomad client enables (nomadlocal.DriverRawExec or
	// DriverDocker).
	Driver string
	// Credentials join the server (CredentialsFromEnv: the user-data exports them).
	Credentials Credentials
	// IMDSEndpoint overrides IMDS's address (AWS_EC2_METADATA_SERVICE_ENDPOINT, as the SDK
	// reads it): how a fake instance reaches its own metadata.
	IMDSEndpoint string
	// Watchdog, when Heartbeat is set: the instance shuts itself down once run RunID's driver
	// has not beaten in Heartbeat for Watchdog, or when the Nomad agent exits (the node can
	// no longer run anything). Without a Heartbeat the agent execs Nomad and watches nothing.
	Heartbeat checkpoint.Store
	RunID     string
	Watchdog  time.Duration
	// Shutdown is the command that powers the instance off (default DefaultShutdown); with
	// shutdown behaviour terminate, EC2 then terminates it.
	Shutdown []string
	// Clock is the watchdog's (nil: the wall clock).
	Clock clock.Clock
}

// DefaultShutdown powers the instance off.
var DefaultShutdown = []string{"shutdown", "-h", "now"}

// Identity is what the agent learns about its instance.
type Identity struct {
	InstanceID string
	Addr       string // local-ipv4: what the agent binds and advertises
}

// Lookup reads the instance's identity from IMDSv2.
func Lookup(ctx context.Context, endpoint string) (Identity, error) {
	c := imds.New(imds.Options{Endpoint: endpoint})
	get := func(path string) (string, error) {
		body, found, err := getMetadata(ctx, c, path)
		if err == nil && !found {
			err = errors.New("not found")
		}
		if err != nil {
			return "", fmt.Errorf("nodeagent: IMDS %s: %w", path, err)
		}
		return strings.TrimSpace(body), nil
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
// the instance ID (what gangs are pinned by), bound and advertised on its own address, with the
// cloud fingerprinters of a real instance, the one task driver its trainer needs, and join.
func ClientConfig(id Identity, dataDir, server string, httpPort, gpus int, driver string, join nomadlocal.Join) string {
	c := nomadlocal.RubberbandNode(id.InstanceID, id.Addr, dataDir, server, httpPort, gpus, driver, join)
	c.CloudFingerprints = true
	return c.HCL()
}

// Run looks the instance up, writes the credentials (0600) and the client configuration into
// DataDir/<instance ID> and execs the Nomad agent in place of this process: stopping the
// instance's processes stops the agent, and nothing is left to wait for it.
func Run(ctx context.Context, o Options) error {
	id, err := Lookup(ctx, o.IMDSEndpoint)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.DataDir, id.InstanceID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	join, err := o.Credentials.write(filepath.Join(dir, "tls"))
	if err != nil {
		return err
	}
	// A free port rather than Nomad's 4646: instances that share an address (a test's fake
	// ones on loopback) must not collide, and nothing needs to know the port in advance.
	port, err := freePort(id.Addr)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, "client.hcl")
	if err := os.WriteFile(conf, []byte(ClientConfig(id, filepath.Join(dir, "data"), o.Server, port, o.GPUs, o.Driver, join)), 0o600); err != nil {
		return fmt.Errorf("nodeagent: %w", err)
	}
	argv := []string{o.NomadBin, "agent", "-config", conf}
	if o.Heartbeat != nil {
		return Supervise(ctx, o, argv, os.Stderr)
	}
	if err := syscall.Exec(o.NomadBin, argv, agentEnv(os.Environ())); err != nil {
		return fmt.Errorf("nodeagent: exec %s: %w", o.NomadBin, err)
	}
	return nil
}

// Supervise runs the Nomad agent argv and the watchdog: when the driver's heartbeat has been
// still for o.Watchdog, or the agent exits, it stops the agent (SIGTERM, SIGKILL after
// nomadGrace), says why on log, and runs o.Shutdown. When ctx ends (the instance itself is
// shutting down) it stops the agent and returns ctx's error.
func Supervise(ctx context.Context, o Options, argv []string, log io.Writer) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = log, log, agentEnv(os.Environ())
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nodeagent: start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stale := make(chan error, 1)
	go func() {
		stale <- heartbeat.Watch(watch, o.Clock, o.Heartbeat, o.RunID, o.Watchdog, min(o.Watchdog/4, heartbeat.Every))
	}()
	var why string
	select {
	case err := <-exited:
		why = fmt.Sprintf("the Nomad agent exited (%v)", err)
	case err := <-stale:
		stopAgent(cmd, exited)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why = err.Error()
	case <-ctx.Done():
		stopAgent(cmd, exited)
		return ctx.Err()
	}
	fmt.Fprintf(log, "node-agent: %s: shutting the instance down\n", why)
	shutdown := o.Shutdown
	if len(shutdown) == 0 {
		shutdown = DefaultShutdown
	}
	out, err := exec.Command(shutdown[0], shutdown[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nodeagent: %s: %w: %s", strings.Join(shutdown, " "), err, out)
	}
	return nil
}

// nomadGrace is how long the Nomad agent has to stop after SIGTERM.
const nomadGrace = 10 * time.Second

// stopAgent ends the running Nomad agent and waits until it has exited.
func stopAgent(cmd *exec.Cmd, exited <-chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(nomadGrace):
		cmd.Process.Kill()
		<-exited
	}
}

func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("nodeagent: free port on %s: %w", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
