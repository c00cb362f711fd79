package process

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rubberband-hpo/rubberband/trial"
)

// Sandbox is the identity a run's trainers run as on a shared host: a uid and gid of their own,
// which no other live run has. The trainers reach only what that identity may: their trial's
// checkpoint directory and a home of their own (HomeDir) under the run's work directory, the
// rest of the run's folder and every other file of the server's being closed to it by its modes
// (the server keeps its root and folders 0711 or 0700, its files 0600). When the run ends every
// process of the uid is killed (EndAll), so that nothing a trainer started outlives it, those
// that left its session and dropped its environment included.
type Sandbox struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// HomeDir is the sandboxed trainers' HOME and TMPDIR, under the runtime's WorkDir.
const HomeDir = "home"

// SandboxRange is the uids (and equal gids) the server gives its runs' sandboxes: First up to
// First+Count-1. They belong to no account (nothing else should run as them). Ledger, when set,
// is the host's file of the last uid handed out (HostLedger), which every server on the host
// shares (Claim): two servers with roots of their own must never give one uid to two runs, since
// the end of either run kills every process of its uid, the other's trainers included.
type SandboxRange struct {
	First, Count int
	Ledger       string
}

// HostLedger is where a host's servers keep the last sandbox uid any of them handed out.
const HostLedger = "/var/lib/rubberband/sandbox-uid"

// DefaultSandboxRange is the range a server uses: 2^31 ids from 2000000000 (uid_t is 32 bits,
// 4294967295 is -1), above what account managers and subordinate-id ranges hand out. It is wide
// because a uid is never handed out twice (Next): what a run's uid left behind on the host (a
// setuid copy of a shell in /tmp, say) must never act as another run's.
var DefaultSandboxRange = SandboxRange{First: 2_000_000_000, Count: 1 << 31, Ledger: HostLedger}

// ErrNoSandbox says trainers cannot be sandboxed here (not root, or no CAP_SETUID, CAP_SETGID,
// CAP_CHOWN and CAP_KILL; or not Linux).
var ErrNoSandbox = errors.New("trainers cannot be sandboxed here")

// Next picks the lowest id of the range above after (the last one handed out) that taken does
// not hold and that no live process runs as: a caller that keeps after never hands a uid out
// twice.
func (rg SandboxRange) Next(after int, taken map[int]bool) (Sandbox, error) {
	live, err := liveUIDs()
	if err != nil {
		return Sandbox{}, err
	}
	for id := max(after+1, rg.First); id < rg.First+rg.Count; id++ {
		if !taken[id] && !live[id] {
			return Sandbox{UID: id, GID: id}, nil
		}
	}
	return Sandbox{}, fmt.Errorf("allocate a sandbox: every uid from %d to %d has been handed out", rg.First, rg.First+rg.Count-1)
}

// Claim is Next with the host's ledger: under an exclusive lock of the Ledger file it picks the
// next uid above both after (the caller's own record) and the last the ledger holds, and writes
// it there before the lock is let go, so no other server on the host picks it too. Without a
// Ledger it is Next.
func (rg SandboxRange) Claim(after int, taken map[int]bool) (Sandbox, error) {
	if rg.Ledger == "" {
		return rg.Next(after, taken)
	}
	if err := os.MkdirAll(filepath.Dir(rg.Ledger), 0o700); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	f, err := os.OpenFile(rg.Ledger, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: lock %s: %w", rg.Ledger, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if text := strings.TrimSpace(string(b)); text != "" {
		last, err := strconv.Atoi(text)
		if err != nil {
			return Sandbox{}, fmt.Errorf("sandbox ledger %s: %w", rg.Ledger, err)
		}
		after = max(after, last)
	}
	sb, err := rg.Next(after, taken)
	if err != nil {
		return Sandbox{}, err
	}
	if err := f.Truncate(0); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(sb.UID)+"\n"), 0); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	return sb, nil
}

// env is what every worker's environment starts from: the inherited allowlist (never the
// driver's whole environment, which on a server is the server's), the runtime's own variables,
// and in a sandbox HOME and TMPDIR of its own.
func (r *Runtime) env() []string {
	base := append(trial.InheritedEnv(os.Environ()), r.ExtraEnv...)
	if r.Sandbox != nil {
		home := filepath.Join(r.WorkDir, HomeDir)
		base = append(base, "HOME="+home, "TMPDIR="+home, "USER=", "LOGNAME=")
	}
	return base
}

// sysProcAttr is how a worker is started: the leader of its own process group, killed if the
// driver dies (Pdeathsig), and as the sandbox's identity when there is one.
func (r *Runtime) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s := r.Sandbox; s != nil {
		a.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}
	}
	if cg := r.cgroup(); cg != nil {
		a.UseCgroupFD, a.CgroupFD = true, cg.fd
	}
	return a
}

// cgroup is the workers' cgroup (Cgroup), opened on first use; nil where there is none.
func (r *Runtime) cgroup() *runCgroup {
	r.cgMu.Lock()
	defer r.cgMu.Unlock()
	if r.cgTried || r.Cgroup == "" {
		return r.cg
	}
	r.cgTried = true
	cg, err := openCgroup(r.Cgroup)
	if err != nil {
		r.logf("the run's trainers are in no cgroup of their own (%v): what they leave is found by process group and token", err)
		return nil
	}
	r.cg = cg
	return cg
}

// endCgroup kills and removes the workers' cgroup: the one this runtime opened, or else one of
// the same name a dead driver of the run left. The next launch makes a fresh one.
func (r *Runtime) endCgroup() error {
	r.cgMu.Lock()
	defer r.cgMu.Unlock()
	if r.Cgroup == "" {
		return nil
	}
	cg := r.cg
	r.cg, r.cgTried = nil, false
	if cg != nil {
		return cg.remove()
	}
	return removeCgroup(r.Cgroup)
}

// prepareSandbox gives a trial's checkpoint directory (dir) and the sandbox's home to the
// sandbox's identity, and keeps the folders above them traversable but not listable (0711, the
// server's): the trainer reaches its own directory and no other's.
func (r *Runtime) prepareSandbox(dir string) error {
	s := r.Sandbox
	if s == nil {
		return nil
	}
	for _, d := range []string{r.WorkDir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	home := filepath.Join(r.WorkDir, HomeDir)
	for _, d := range []string{home, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		// MkdirAll leaves an existing folder's mode: a restored checkpoint's was open to all,
		// and another run's trainer read it through the 0711 folders above.
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if err := chownTree(d, s.UID, s.GID); err != nil {
			return fmt.Errorf("sandbox: give %s to uid %d: %w", d, s.UID, err)
		}
	}
	return nil
}

// chownTree gives dir and all it holds to uid and gid, through an os.Root of dir: what a
// trainer left there (or swaps in meanwhile, a link for a folder) never takes the change
// outside dir, and a link is given away itself, never what it points at.
func chownTree(dir string, uid, gid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return root.Lchown(p, uid, gid)
	})
}

// Reachable makes every folder from root down to dir traversable by other users but not
// listable (0711): a sandboxed trainer reaches its run's work directory through them, and sees
// none of their entries. It refuses a root whose own parents other users cannot traverse.
func Reachable(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not under %s", dir, root)
	}
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (above the server's root) is closed to other users (mode %v): sandboxed trainers could not reach their runs; chmod o+x it", p, info.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	p := root
	for _, part := range append([]string{"."}, strings.Split(rel, string(filepath.Separator))...) {
		p = filepath.Join(p, part)
		if err := os.Chmod(p, 0o711); err != nil {
			return fmt.Errorf("make %s reachable: %w", p, err)
		}
	}
	return nil
}

// Give makes dir and all it holds the sandbox's (its files private to it, 0700 folders): a
// server's run's code, which its trainers run in and may write beside.
func (s Sandbox) Give(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := chownTree(dir, s.UID, s.GID); err != nil {
		return fmt.Errorf("sandbox: give %s to uid %d: %w", dir, s.UID, err)
	}
	return nil
}
