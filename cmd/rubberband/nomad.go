package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/nomad"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// nomadBackend connects to the Nomad cluster NOMAD_ADDR names (with NOMAD_TOKEN, NOMAD_REGION,
// NOMAD_NAMESPACE, as the nomad CLI reads them), or starts a server of its own in the state
// directory when none is set, and returns the provider (client agents as nodes), the runtime and
// a function that stops what it started.
func nomadBackend(ctx context.Context, exp *spec.Experiment, dir string, timeScale float64, self, runID string) (cloud.Provider, executor.Runtime, func(), error) {
	m, err := sim.NewModel(exp)
	if err != nil {
		return nil, nil, nil, err
	}
	offer := offerOf(exp, m)
	bin, err := nomadBinary()
	if err != nil {
		return nil, nil, nil, err
	}
	stop := func() {}
	cfg := nomadapi.DefaultConfig() // NOMAD_ADDR, NOMAD_TOKEN, NOMAD_REGION, NOMAD_NAMESPACE
	if os.Getenv("NOMAD_ADDR") == "" {
		addr, stopServer, err := startNomadServer(filepath.Join(dir, "nomad", "server"), bin)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.Address, stop = addr, stopServer
	}
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("nomad: %w", err)
	}
	provider, err := nomadlocal.New(ctx, nomadlocal.Config{NomadBin: bin, Dir: filepath.Join(dir, "nomad"), Client: client,
		GPUsPerNode: exp.Cluster.GPUsPerNode, FreePort: freePort, Offer: offer})
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	if os.Getenv("NOMAD_ADDR") == "" {
		// Our own server stops with us: so do the agents that joined it.
		stopServer := stop
		stop = func() { provider.Shutdown(); stopServer() }
	}
	env, err := storeEnv(exp, dir)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	rt := &nomad.Runtime{Client: client, Experiment: exp.Name, RunID: runID, Self: self, StoreEnv: env,
		ExtraEnv: []string{fmt.Sprintf("RB_TIME_SCALE=%g", timeScale)}, LogDir: filepath.Join(dir, "logs"), Log: os.Stderr}
	if exp.Trainer.Image != "" {
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"} {
			if v := os.Getenv(k); v != "" {
				rt.ImageEnv = append(rt.ImageEnv, k+"="+v)
			}
		}
	}
	return provider, rt, stop, nil
}

// nomadBinary finds the nomad agent: RB_NOMAD_BIN, the one `make deps` built, or PATH.
func nomadBinary() (string, error) {
	if p := os.Getenv("RB_NOMAD_BIN"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(filepath.Dir(self)), ".tools", "bin", "nomad")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("nomad"); err == nil {
		return p, nil
	}
	return "", usageErr("no nomad binary: run `make deps`, put nomad on PATH or set RB_NOMAD_BIN")
}

// startNomadServer runs a one-server Nomad cluster on loopback, in dir.
func startNomadServer(dir, bin string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return "", nil, err
		}
		ports[i] = p
	}
	conf := filepath.Join(dir, "server.hcl")
	os.WriteFile(conf, []byte(nomadlocal.ServerConfig(filepath.Join(dir, "data"), ports[0], ports[1], ports[2])), 0o644)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "agent", "-config", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, fmt.Errorf("start nomad server: %w", err)
	}
	logf.Close()
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c, _ := nomadapi.NewClient(&nomadapi.Config{Address: addr})
	for deadline := time.Now().Add(60 * time.Second); ; {
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("the local nomad server did not start (see %s)", filepath.Join(dir, "server.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
