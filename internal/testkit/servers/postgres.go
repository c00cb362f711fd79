package servers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// debianPostgres is where Debian's postgresql-15 package puts its binaries (not on PATH).
const debianPostgres = "/usr/lib/postgresql/15/bin/postgres"

// Postgres is a real PostgreSQL server for one test, reached over loopback TCP as the
// superuser "rubberband" with trust authentication.
type Postgres struct {
	// URL is a database created for the test: postgres://rubberband@127.0.0.1:PORT/rubberband.
	URL  string
	Port int
	bin  string // the directory of postgres, initdb and createdb
	dir  string // the data directory's parent, also the unix socket's directory
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{} // closed when postgres has exited
	log  *os.File
	dbs  atomic.Int64
}

// StartPostgres initialises a cluster in a temporary directory, starts postgres on a free port
// and creates the database URL names. PostgreSQL refuses to run as root, so as root initdb and
// postgres run as the "postgres" system user (Debian's package makes it), else as nobody.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{bin: postgresBinDir(t), Port: FreePort(t)}
	cred, err := postgresCredential()
	if err != nil {
		t.Fatal(err)
	}
	p.cred = cred
	// Not t.TempDir: its parents are root's and 0700, which the postgres user cannot traverse.
	if p.dir, err = os.MkdirTemp("", "rb-postgres-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if cred != nil {
		if err := os.Chown(p.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if p.log, err = os.Create(filepath.Join(p.dir, "postgres.log")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(p.dir, "data")
	// fsync off and no sync at initdb: a test's cluster is thrown away, durability buys nothing.
	// Text collates as en-US (ICU), as in a typical production database, not in byte order: a
	// query whose order depends on the collation shows it in tests.
	if out, err := p.command("initdb", "--pgdata", data, "--username", "rubberband", "--auth", "trust",
		"--encoding", "UTF8", "--locale", "C", "--locale-provider", "icu", "--icu-locale", "en-US",
		"--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, tail(out))
	}
	p.cmd = p.command("postgres", "-D", data, "-p", strconv.Itoa(p.Port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "shared_buffers=32MB", "-c", "max_connections=200")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(data, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.logTail())
	}
	p.URL = p.NewDatabase(t)
	return p
}

// NewDatabase creates an empty database and returns its URL, for a test that wants one of its
// own.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	name := "rubberband"
	if n := p.dbs.Add(1); n > 1 {
		name += strconv.FormatInt(n, 10)
	}
	out, err := exec.Command(filepath.Join(p.bin, "createdb"), "--host", "127.0.0.1", "--port", strconv.Itoa(p.Port),
		"--username", "rubberband", name).CombinedOutput()
	if err != nil {
		t.Fatalf("createdb %s: %v\n%s", name, err, out)
	}
	return fmt.Sprintf("postgres://rubberband@127.0.0.1:%d/%s?sslmode=disable", p.Port, name)
}

// command runs one of the cluster's binaries, as the postgres user when we are root.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	return cmd
}

// waitReady waits until postmaster.pid says "ready": the server then accepts connections (what
// pg_ctl -w waits for), where an open port alone may still answer "starting up".
func (p *Postgres) waitReady(data string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited while starting: %v", p.cmd.ProcessState)
		default:
		}
		if b, err := os.ReadFile(filepath.Join(data, "postmaster.pid")); err == nil {
			// Line 8 is the postmaster's status (src/include/utils/pidfile.h).
			if lines := strings.Split(string(b), "\n"); len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready on port %d after %v", p.Port, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down fast (SIGINT: it ends open sessions, where SIGTERM waits for them)
// and removes its directory.
func (p *Postgres) Stop() {
	if p.done != nil {
		select {
		case <-p.done: // exited (and reaped) already: its pid may be another's now
		default:
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
		}
		p.done = nil
	}
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
		p.dir = ""
	}
}

func (p *Postgres) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
	return tail(bytes.TrimSpace(b))
}

// postgresBinDir finds PostgreSQL's binaries: beside RB_POSTGRES_BIN (the postgres binary),
// Debian's, or on PATH; skipping the test when there are none (failing it under CI).
func postgresBinDir(t testing.TB) string {
	if os.Getenv("RB_POSTGRES_BIN") == "" {
		if _, err := os.Stat(debianPostgres); err == nil {
			return filepath.Dir(debianPostgres)
		}
	}
	return filepath.Dir(Binary(t, "postgres", "RB_POSTGRES_BIN"))
}

// postgresCredential is whom to run PostgreSQL as: nil (ourselves) unless we are root.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, fmt.Errorf("running as root and no postgres (or nobody) user to run PostgreSQL as")
}
