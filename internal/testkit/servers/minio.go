package servers

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIO is a real MinIO server for one test.
type MinIO struct {
	Endpoint          string // 127.0.0.1:PORT
	AccessKey, Secret string
	bin, dir          string
	port, console     int
	cmd               *exec.Cmd
	t                 testing.TB
}

// StartMinIO starts a MinIO server in a temporary directory and sets the AWS credential
// variables for the test, so that stores find them the standard way.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", minioKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", minioSecret)
	return RunMinIO(t)
}

// RunMinIO is StartMinIO without the variables, for a parallel test that hands the keys
// (AccessKey, Secret) on itself.
func RunMinIO(t testing.TB) *MinIO {
	t.Helper()
	m := &MinIO{bin: Binary(t, "minio", "RB_MINIO_BIN"), dir: t.TempDir(), port: FreePort(t), console: FreePort(t),
		AccessKey: minioKey, Secret: minioSecret, t: t}
	m.Endpoint = fmt.Sprintf("127.0.0.1:%d", m.port)
	m.start()
	t.Cleanup(m.Stop)
	return m
}

const minioKey, minioSecret = "rubberband", "rubberband-secret-key"

func (m *MinIO) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "server", "--quiet", "--address", m.Endpoint, "--console-address", fmt.Sprintf("127.0.0.1:%d", m.console),
		"--certs-dir", filepath.Join(m.dir, "certs"), filepath.Join(m.dir, "data"))
	m.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.Secret, "MINIO_BROWSER=off")
	m.cmd.Stdout, m.cmd.Stderr = nil, nil
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start minio: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + m.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			// Ready means its IAM too: it answers health before STS can hand out keys
			// ("Server not initialized"), which TemporaryKeys needs.
			if _, _, _, serr := m.assumeRole(); resp.StatusCode == http.StatusOK && serr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			m.Stop()
			m.t.Fatalf("minio not ready at %s", m.Endpoint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the server abruptly (SIGKILL), as a crash would.
func (m *MinIO) Kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		m.cmd.Wait()
		m.cmd = nil
	}
}

// Restart starts the server again on the same port and data.
func (m *MinIO) Restart() { m.start() }

// Stop ends the server; the test's temporary directory holds its data and goes with it.
func (m *MinIO) Stop() {
	stopGroup(m.cmd, 5*time.Second)
	m.cmd = nil
}

// TemporaryKeys are keys of MinIO's STS (AssumeRole) for the root user: distinct from AccessKey
// and Secret, good for a while, as a role's are.
func (m *MinIO) TemporaryKeys(t testing.TB) (key, secret, token string) {
	t.Helper()
	key, secret, token, err := m.assumeRole()
	if err != nil {
		t.Fatal(err)
	}
	return key, secret, token
}

func (m *MinIO) assumeRole() (key, secret, token string, err error) {
	c, err := credentials.NewSTSAssumeRole("http://"+m.Endpoint, credentials.STSAssumeRoleOptions{AccessKey: m.AccessKey, SecretKey: m.Secret})
	if err != nil {
		return "", "", "", err
	}
	v, err := c.GetWithContext(nil)
	return v.AccessKeyID, v.SecretAccessKey, v.SessionToken, err
}
