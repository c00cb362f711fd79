package process

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// TokenVar carries each worker's token into its environment, and so into its descendants': it
// is how the runtime finds the processes a worker left behind, those outside its process group
// included.
const TokenVar = "RB_WORKER_TOKEN"

// DefaultWaitDelay is how long a worker's output is read at most after it exited, by default.
const DefaultWaitDelay = 5 * time.Second

// worker is one started worker process: the leader of its own process group, marked by its token.
type worker struct {
	r     *Runtime
	cmd   *exec.Cmd
	name  string // "trial T worker N", for messages
	token string
	start uint64 // the leader's start time, its identity in the pids file (0: unknown)
	// since is where PIDs stood before the leader was started (nil when /proc did not say):
	// its descendants are among the PIDs handed out after.
	since *pidCursor
	out   *io.PipeWriter
	log   io.Writer // the trial's log, when it has one of its own (nil for a reused worker)
}

// workers is what the runtime knows of its workers: their tokens' common prefix, and those not
// yet waited for (never reaped by a sweep: their exit status is cmd.Wait's).
type workers struct {
	mu     sync.Mutex
	prefix string // random, made with the first token
	seq    uint64
	live   map[int]*worker // by PID
}

// newToken is a token for the next worker: the runtime's random prefix and a sequence number.
func (r *Runtime) newToken() string {
	ws := &r.workers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.prefix == "" {
		b := make([]byte, 8)
		rand.Read(b)
		ws.prefix = hex.EncodeToString(b) + "-"
	}
	ws.seq++
	return fmt.Sprintf("%s%x", ws.prefix, ws.seq)
}

// validToken says whether a token read from a pids file is one the runtime makes: nothing else
// selects processes to end.
func validToken(t string) bool {
	prefix, seq, ok := strings.Cut(t, "-")
	if !ok || len(prefix) != 16 || seq == "" || len(seq) > 16 {
		return false
	}
	for _, c := range prefix + seq {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// startWorker starts cmd as a worker process: the leader of its own process group, marked by a
// token, killed if the driver dies (Pdeathsig), its output read for WaitDelay at most after it
// exits. Its stdout goes to out when out is not nil.
func (r *Runtime) startWorker(cmd *exec.Cmd, name string, out *io.PipeWriter, log io.Writer) (*worker, error) {
	w := &worker{r: r, cmd: cmd, name: name, token: r.newToken(), out: out, log: log}
	cmd.Env = append(cmd.Env, TokenVar+"="+w.token)
	// Pdeathsig: a worker does not outlive a driver that died (what it left behind is ended by
	// Reap on resume or cancel, through the pids file).
	cmd.SysProcAttr = r.sysProcAttr()
	cmd.WaitDelay = r.waitDelay()
	if out != nil {
		cmd.Stdout = out
	}
	if c, ok := readCursor(); ok {
		w.since = &c
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if st, err := readStat(cmd.Process.Pid); err == nil { // not reaped before Wait: it is there
		w.start = st.start
	}
	r.workers.mu.Lock()
	if r.workers.live == nil {
		r.workers.live = map[int]*worker{}
	}
	r.workers.live[cmd.Process.Pid] = w
	r.workers.mu.Unlock()
	return w, nil
}

func (r *Runtime) waitDelay() time.Duration {
	if r.WaitDelay > 0 {
		return r.WaitDelay
	}
	return DefaultWaitDelay
}

// isLiveWorker says whether pid is a worker this runtime has not waited for yet.
func (r *Runtime) isLiveWorker(pid int) bool {
	r.workers.mu.Lock()
	defer r.workers.mu.Unlock()
	_, ok := r.workers.live[pid]
	return ok
}

// pid is the worker's process ID, also its process group's.
func (w *worker) pid() int { return w.cmd.Process.Pid }

// wait waits for the worker's leader to exit and returns its exit status. As soon as it has
// exited, whatever it left behind is ended (its process group, and the processes carrying its
// token, with their descendants), so that no inherited pipe keeps its output open; something
// that still does is cut off WaitDelay after the exit (exec.ErrWaitDelay, said in the logs; the
// leader's exit status stands). Its stdout pipe, if any, is closed once everything was read.
func (w *worker) wait() error {
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		waitExit(w.pid())
		w.endLeftBehind()
	}()
	err := w.cmd.Wait()
	<-swept
	w.r.workers.mu.Lock()
	delete(w.r.workers.live, w.pid())
	w.r.workers.mu.Unlock()
	if w.out != nil {
		w.out.Close()
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		w.note(fmt.Sprintf("%s exited 0, but something it started still held its output open %v later: stopped reading it (what it printed after that is not in the log)",
			w.name, w.r.waitDelay()))
		err = nil
	}
	return err
}

// endLeftBehind ends the processes the worker left behind, and says which.
func (w *worker) endLeftBehind() {
	ended := w.r.endStrays(selector{groups: map[int]bool{w.pid(): true}, token: func(t string) bool { return t == w.token }, since: w.since})
	if len(ended) > 0 {
		w.note(fmt.Sprintf("%s exited; ended %s it left behind", w.name, describe(ended)))
	}
}

// note says something about the worker in the runtime's log and the trial's.
func (w *worker) note(msg string) {
	w.r.logf("%s", msg)
	if w.log != nil {
		fmt.Fprintf(w.log, "rubberband: %s\n", msg)
	}
}

// selector says which processes endStrays ends: the members of some process groups, and the
// processes whose worker token it accepts; with the descendants of both.
type selector struct {
	groups map[int]bool
	token  func(string) bool
	// since, when set, says that whatever is selected was started after it: only the processes
	// with PIDs handed out since are looked at, the runtime's other workers aside.
	since *pidCursor
}

// candidates are the processes endStrays looks among: those since sel.since when it can tell,
// or every one.
func (r *Runtime) candidates(sel selector) ([]procStat, error) {
	if sel.since != nil {
		other := func(pid int) bool { return !sel.groups[pid] && r.isLiveWorker(pid) }
		if list, ok := processesSince(*sel.since, other); ok {
			return list, nil
		}
	}
	return processes()
}

// endStrays kills every live process sel selects (this process aside) with its descendants,
// and looks again until none is left alive (a process may fork while it is being killed), for
// two seconds at most. Those that were re-parented to this process (BecomeSubreaper) it reaps,
// unless they are workers waited for by cmd.Wait. It returns the processes it killed.
func (r *Runtime) endStrays(sel selector) []procStat {
	self := os.Getpid()
	var ended []procStat
	killed := map[int]bool{}
	pause := time.Millisecond
	for deadline := time.Now().Add(2 * time.Second); ; {
		all, err := r.candidates(sel)
		if err != nil {
			return ended
		}
		alive := 0
		for _, st := range pick(all, sel, self) {
			if st.dead() {
				if st.ppid == self && !r.isLiveWorker(st.pid) {
					reapChild(st.pid, false)
				}
				continue
			}
			alive++
			if killSame(st) && !killed[st.pid] {
				killed[st.pid] = true
				ended = append(ended, st)
			}
		}
		if alive == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	// Those re-parented here are reaped once they have died: a zombie's environment is gone, so
	// it is not found again by its token.
	for _, st := range ended {
		if !r.isLiveWorker(st.pid) {
			go reapChild(st.pid, true)
		}
	}
	return ended
}

// pick is what sel selects among all, with the descendants, never self.
func pick(all []procStat, sel selector, self int) []procStat {
	children := map[int][]int{}
	byPID := make(map[int]procStat, len(all))
	var queue []int
	for _, st := range all {
		byPID[st.pid] = st
		children[st.ppid] = append(children[st.ppid], st.pid)
		if st.pid == self {
			continue
		}
		if sel.groups[st.pgid] || (!st.dead() && sel.token != nil && sel.token(tokenOf(st.pid))) {
			queue = append(queue, st.pid)
		}
	}
	in := map[int]bool{}
	var out []procStat
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if in[pid] || pid == self {
			continue
		}
		in[pid] = true
		out = append(out, byPID[pid])
		queue = append(queue, children[pid]...)
	}
	return out
}

// describe names processes for a log line: "2 processes (1234 sleep, 1240 sh)".
func describe(ps []procStat) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = fmt.Sprintf("%d %s", p.pid, p.comm)
	}
	noun := "processes"
	if len(ps) == 1 {
		noun = "process"
	}
	return fmt.Sprintf("%d %s (%s)", len(ps), noun, strings.Join(names, ", "))
}
