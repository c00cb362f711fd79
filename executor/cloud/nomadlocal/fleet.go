package nomadlocal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// Certificate names Nomad checks: a server's RPC and HTTP certificate must be valid for
// ServerName (verify_server_hostname), and the API client addresses a client agent as ClientName.
const (
	ServerName = "server.global.nomad"
	ClientName = "client.global.nomad"
	// cliName is the certificate of API clients (the driver, a person's nomad CLI): valid for
	// the HTTP API, which any certificate of the CA opens, and for nothing that checks a name.
	cliName = "cli.global.nomad"
)

// certValidity is how long the fleet's CA and certificates are valid: longer than any run lasts
// with its resumes; what bounds a leaked certificate is the fleet, whose server stops with its
// run (docs/nomad.md, "A fleet that strangers cannot use").
const certValidity = 365 * 24 * time.Hour

// Files in a fleet directory. Every one is 0600 in a 0700 directory: keys, the gossip key and
// the management token are secrets, and certificates are nobody else's business.
const (
	fleetCA         = "ca.pem"
	fleetCAKey      = "ca-key.pem"
	fleetServer     = "server.pem"
	fleetServerKey  = "server-key.pem"
	fleetClient     = "client.pem"
	fleetClientKey  = "client-key.pem"
	fleetCLI        = "cli.pem"
	fleetCLIKey     = "cli-key.pem"
	fleetGossip     = "gossip.key"
	fleetManagement = "management.token"
)

// Fleet is the security of one Nomad cluster rubberband starts: a CA of its own, the
// certificates of its server, of its client agents and of API clients, the server's gossip
// encryption key, and the ACL management token the driver bootstraps the cluster with. It lives
// in a directory of the run's state, so that a resumed driver reaches the same cluster.
type Fleet struct {
	Dir string
	// Token is the ACL management token's secret ID: never logged, never in a job.
	Token string
	// GossipKey is the servers' serf encryption key (base64): never given to clients.
	GossipKey string
}

// OpenFleet reads the fleet kept in dir, making what is missing: a fleet made once is the
// same for every driver of the run, so that instances rented earlier, whose user-data holds
// its client certificate, go on joining.
func OpenFleet(dir string) (*Fleet, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nomad fleet: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nomad fleet: %w", err)
	}
	f := &Fleet{Dir: dir}
	ca, caKey, err := f.loadCA()
	if err != nil {
		return nil, err
	}
	for _, leaf := range []struct {
		cert, key, name string
		usage           []x509.ExtKeyUsage
	}{
		// Nomad uses one certificate per agent for both directions of its connections.
		{fleetClient, fleetClientKey, ClientName, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{fleetCLI, fleetCLIKey, cliName, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		if exists(f.path(leaf.cert)) && exists(f.path(leaf.key)) {
			continue
		}
		if err := f.issue(ca, caKey, leaf.cert, leaf.key, leaf.name, nil, leaf.usage); err != nil {
			return nil, err
		}
	}
	if f.GossipKey, err = f.secret(fleetGossip, func() (string, error) {
		b, err := random(32)
		return base64.StdEncoding.EncodeToString(b), err
	}); err != nil {
		return nil, err
	}
	if f.Token, err = f.secret(fleetManagement, newUUID); err != nil {
		return nil, err
	}
	return f, nil
}

// IssueServer (re)writes the server's certificate, valid for ServerName, localhost and the
// addresses hosts (where it is reached): a server restarted on another address gets a
// certificate for that one.
func (f *Fleet) IssueServer(hosts ...string) error {
	ca, caKey, err := f.loadCA()
	if err != nil {
		return err
	}
	return f.issue(ca, caKey, fleetServer, fleetServerKey, ServerName, append([]string{"localhost", "127.0.0.1"}, hosts...),
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// TLS is what an agent's tls block names: the CA that signs the fleet's certificates, and the
// agent's own certificate and key (file paths).
type TLS struct{ CA, Cert, Key string }

// ServerTLS is the server's certificate (IssueServer writes it).
func (f *Fleet) ServerTLS() TLS {
	return TLS{CA: f.path(fleetCA), Cert: f.path(fleetServer), Key: f.path(fleetServerKey)}
}

// Join is what a client agent needs to join the fleet: its CA, the client certificate (valid
// as ClientName), and ACLs on. Clients need no token: Nomad authenticates a client's first
// registration by its certificate (mutual TLS) and every later call by the node's own secret.
func (f *Fleet) Join() Join {
	return Join{TLS: TLS{CA: f.path(fleetCA), Cert: f.path(fleetClient), Key: f.path(fleetClientKey)}, ACL: true}
}

// APIConfig is an API client of the fleet's server at addr (https://host:port): mutual TLS with
// the API client certificate, the server's name checked, and the management token.
func (f *Fleet) APIConfig(addr string) *nomad.Config {
	return &nomad.Config{Address: addr, SecretID: f.Token, TLSConfig: &nomad.TLSConfig{
		CACert: f.path(fleetCA), ClientCert: f.path(fleetCLI), ClientKey: f.path(fleetCLIKey), TLSServerName: ServerName}}
}

// Env is the nomad CLI's environment for the fleet's server at addr, with token (the management
// token when empty): for a person who looks into a run's cluster, and for tests.
func (f *Fleet) Env(addr, token string) []string {
	if token == "" {
		token = f.Token
	}
	return []string{"NOMAD_ADDR=" + addr, "NOMAD_CACERT=" + f.path(fleetCA), "NOMAD_CLIENT_CERT=" + f.path(fleetCLI),
		"NOMAD_CLIENT_KEY=" + f.path(fleetCLIKey), "NOMAD_TLS_SERVER_NAME=" + ServerName, "NOMAD_TOKEN=" + token}
}

func (f *Fleet) path(name string) string { return filepath.Join(f.Dir, name) }

// loadCA reads the fleet's CA, making one when there is none.
func (f *Fleet) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, errCert := os.ReadFile(f.path(fleetCA))
	keyPEM, errKey := os.ReadFile(f.path(fleetCAKey))
	if errors.Is(errCert, fs.ErrNotExist) && errors.Is(errKey, fs.ErrNotExist) {
		return f.makeCA()
	}
	if err := errors.Join(errCert, errKey); err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: read CA: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("nomad fleet: %s or %s is not PEM", f.path(fleetCA), f.path(fleetCAKey))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: CA: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: CA key: %w", err)
	}
	return cert, key, nil
}

func (f *Fleet) makeCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "rubberband fleet CA " + serial.Text(16)[:8]},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(certValidity), IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: CA: %w", err)
	}
	// The key first: a CA certificate without its key is a fleet that cannot grow.
	if err := writeKey(f.path(fleetCAKey), key); err != nil {
		return nil, nil, err
	}
	if err := safefile.Write(f.path(fleetCA), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, nil, fmt.Errorf("nomad fleet: %w", err)
	}
	return cert, key, nil
}

// issue writes a certificate signed by the CA for name (and hosts: DNS names or IP addresses)
// with its new key.
func (f *Fleet) issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile, name string, hosts []string, usage []x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("nomad fleet: key for %s: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(certValidity),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("nomad fleet: certificate for %s: %w", name, err)
	}
	if err := writeKey(f.path(keyFile), key); err != nil {
		return err
	}
	if err := safefile.Write(f.path(certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("nomad fleet: %w", err)
	}
	return nil
}

// secret reads the one-line secret in file, or makes it with make and writes it (0600) first.
func (f *Fleet) secret(file string, make func() (string, error)) (string, error) {
	b, err := os.ReadFile(f.path(file))
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("nomad fleet: %w", err)
	}
	s, err := make()
	if err != nil {
		return "", err
	}
	if err := safefile.Write(f.path(file), []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("nomad fleet: %w", err)
	}
	return s, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("nomad fleet: %w", err)
	}
	if err := safefile.Write(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("nomad fleet: %w", err)
	}
	return nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("nomad fleet: serial number: %w", err)
	}
	return n, nil
}

func random(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("nomad fleet: %w", err)
	}
	return b, nil
}

// newUUID is a random (version 4) UUID: the form Nomad's ACL token secrets take.
func newUUID() (string, error) {
	b, err := random(16)
	if err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
