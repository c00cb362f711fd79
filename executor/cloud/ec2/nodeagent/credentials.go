package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// The variables the user-data exports the credentials in (PEM text): not flags, which any user
// of the instance reads in the process list; and taken out of the environment the Nomad agent
// gets, which its raw_exec tasks would inherit.
const (
	EnvCA   = "RB_NOMAD_CA_PEM"
	EnvCert = "RB_NOMAD_CERT_PEM"
	EnvKey  = "RB_NOMAD_KEY_PEM"
)

// Credentials are what an instance's Nomad client needs to join a locked-down cluster: the CA's
// certificate, a client certificate and its key (PEM text), and whether the cluster enforces
// ACLs (a client needs no token: Nomad admits a client by its certificate).
type Credentials struct {
	CA, Cert, Key string
	ACL           bool
}

// CredentialsFromEnv reads the credentials the user-data exported, with acl as the --acl flag.
func CredentialsFromEnv(getenv func(string) string, acl bool) Credentials {
	return Credentials{CA: getenv(EnvCA), Cert: getenv(EnvCert), Key: getenv(EnvKey), ACL: acl}
}

// ReadCredentials reads the PEM files of join: what the driver puts into user-data.
func ReadCredentials(join nomadlocal.Join) (Credentials, error) {
	c := Credentials{ACL: join.ACL}
	for _, f := range []struct {
		to   *string
		path string
	}{{&c.CA, join.CA}, {&c.Cert, join.Cert}, {&c.Key, join.Key}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return c, fmt.Errorf("nodeagent: Nomad credentials: %w", err)
		}
		*f.to = string(b)
	}
	return c, nil
}

// exports are the script's lines that export the credentials, in their variables.
func (c Credentials) exports() string {
	var b strings.Builder
	for _, v := range []struct{ name, pem string }{{EnvCA, c.CA}, {EnvCert, c.Cert}, {EnvKey, c.Key}} {
		if v.pem != "" {
			fmt.Fprintf(&b, "export %s=%s\n", v.name, quote(v.pem))
		}
	}
	return b.String()
}

// write writes the TLS files into dir (0700, the files 0600) and returns how the agent joins.
func (c Credentials) write(dir string) (nomadlocal.Join, error) {
	join := nomadlocal.Join{ACL: c.ACL}
	if c.CA == "" && c.Cert == "" && c.Key == "" {
		return join, nil
	}
	if c.CA == "" || c.Cert == "" || c.Key == "" {
		return join, fmt.Errorf("nodeagent: Nomad TLS needs %s, %s and %s, and some are empty", EnvCA, EnvCert, EnvKey)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return join, fmt.Errorf("nodeagent: %w", err)
	}
	join.TLS = nomadlocal.TLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	for _, f := range []struct{ path, pem string }{{join.CA, c.CA}, {join.Cert, c.Cert}, {join.Key, c.Key}} {
		if err := os.WriteFile(f.path, []byte(f.pem), 0o600); err != nil {
			return join, fmt.Errorf("nodeagent: %w", err)
		}
	}
	return join, nil
}

// agentEnv is environ without the credentials' variables.
func agentEnv(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == EnvCA || k == EnvCert || k == EnvKey
	})
}
