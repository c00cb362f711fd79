package ec2sim

import (
	"maps"
	"path/filepath"
	"testing"
	"time"
)

// StartForTest starts a server for a test, with short defaults (boot 100 ms, kill grace 500 ms,
// its directory under t's), closes it when t ends, and points this process's AWS SDK at it:
// ClientEnv set with t.Setenv, and nothing of the machine's own AWS configuration left to leak
// in. Tests that use it cannot run in parallel (t.Setenv).
func StartForTest(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, _ := StartForTestEnv(t, cfg)
	return s
}

// StartForTestEnv is StartForTest, and also returns what it set as KEY=VALUE, for tests that run a
// binary against the server.
func StartForTestEnv(t testing.TB, cfg Config) (*Server, []string) {
	t.Helper()
	if cfg.BootDelay == 0 && cfg.BootDelayFunc == nil {
		cfg.BootDelay = 100 * time.Millisecond
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	home := t.TempDir()
	env := map[string]string{
		"AWS_SESSION_TOKEN":           "",
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_ENDPOINT_URL":            "",
	}
	maps.Copy(env, s.ClientEnv())
	var list []string
	for k, v := range env {
		t.Setenv(k, v)
		list = append(list, k+"="+v)
	}
	return s, list
}
