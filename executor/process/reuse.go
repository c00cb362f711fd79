package process

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/trial"
)

// DefaultIdleTimeout is how long a reused worker waits for its next trial by default.
const DefaultIdleTimeout = 10 * time.Second

// reused is one trainer process that serves a single-worker gang's trials one after another
// (Gang.Reuse, trial.ReuseVar): a launch on the same command, node and GPUs hands it the next
// trial on its standard input instead of starting a process.
type reused struct {
	r     *Runtime
	key   string
	w     *worker
	stdin io.WriteCloser
	gone  chan struct{} // closed once the process has exited and its output is read

	mu   sync.Mutex
	cur  *handle // the launch it serves, nil while idle
	idle *time.Timer
}

// pool holds the idle reused workers by key.
type pool struct {
	mu     sync.Mutex
	idle   map[string][]*reused
	closed bool
}

// launchReused runs h's trial (env) on an idle reused worker of the same command, node and
// GPUs, or starts one.
func (r *Runtime) launchReused(h *handle, node, dir string, env trial.Env, argv, base []string) error {
	vars, err := env.Vars()
	if err != nil {
		return fmt.Errorf("worker %d: %w", env.Rank, err)
	}
	h.done, h.exited = make(chan struct{}), make(chan struct{})
	key := strings.Join(argv, "\x00") + "\x00" + node + "\x00" + fmt.Sprint(env.GPUs) + "\x00" + dir
	for {
		p := r.takeIdle(key)
		if p == nil {
			break
		}
		h.workers, h.reused = []*worker{p.w}, p
		if err := h.writePIDs(); err != nil {
			p.retire()
			return err
		}
		if err := p.assign(h, vars); err == nil {
			fmt.Fprintf(h.log, "=== served by reused trainer process %d\n", p.w.pid())
			return nil
		}
		p.retire() // it went away while idle: a new process takes the trial
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(append([]string(nil), base...), vars...), trial.ReuseVar+"=1")
	cmd.Dir = dir
	p := &reused{r: r, key: key, gone: make(chan struct{}), cur: h}
	cmd.Stderr = output{p}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, stdoutW := io.Pipe()
	w, err := r.startWorker(cmd, "reused trainer process", stdoutW, nil)
	if err != nil {
		p.stdin.Close()
		return fmt.Errorf("start worker %d: %w", env.Rank, err)
	}
	p.w = w
	w.name = fmt.Sprintf("reused trainer process %d", w.pid())
	h.workers, h.reused = []*worker{w}, p
	fmt.Fprintf(h.log, "=== started trainer process %d, to be reused\n", w.pid())
	go p.serve(stdout)
	if err := h.writePIDs(); err != nil {
		syscall.Kill(-w.pid(), syscall.SIGKILL)
		return err
	}
	return nil
}

// assign hands the idle worker h's trial.
func (p *reused) assign(h *handle, vars []string) error {
	line, err := trial.Assignment(vars)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cur = h
	p.mu.Unlock()
	if _, err := p.stdin.Write(line); err != nil {
		p.mu.Lock()
		p.cur = nil
		p.mu.Unlock()
		return err
	}
	return nil
}

// serve reads the process's output until it exits: reports go to the launch it serves, an end
// line ends that launch, and an exit ends the one it was serving, if any, as an ordinary worker's
// exit would (a trainer that ignores trial.ReuseVar serves one trial and exits 0).
func (p *reused) serve(stdout io.Reader) {
	waited := make(chan error, 1)
	go func() { waited <- p.w.wait() }() // closes stdout once the output is read
	trial.ScanRuns(stdout, output{p}, p.report, p.malformed, p.end)
	err := <-waited
	p.r.dropIdle(p)
	p.mu.Lock()
	h := p.cur
	p.cur = nil
	p.mu.Unlock()
	close(p.gone)
	if h != nil {
		if err != nil {
			err = fmt.Errorf("worker 0: %w", err)
		}
		h.endRun(err)
	}
}

func (p *reused) serving() *handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *reused) report(rep trial.Report) {
	if h := p.serving(); h != nil {
		h.report(rep)
	}
}

func (p *reused) malformed(err error) {
	if h := p.serving(); h != nil {
		h.malformed(err)
	}
}

// end takes an end line: the launch served ends with the trainer's code, and the process goes
// back to the pool unless the launch failed or was stopped (SIGTERM ends a trainer for good).
func (p *reused) end(code int) {
	p.mu.Lock()
	h := p.cur
	p.cur = nil
	p.mu.Unlock()
	if h == nil {
		p.r.logf("reused worker %d: an end line while it served no trial: ignored", p.w.pid())
		return
	}
	var err error
	if code != trial.ExitReached {
		err = fmt.Errorf("worker 0: the trainer ended the trial with code %d", code)
	}
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	// Back in the pool before the launch's GPUs are free (endRun): the next launch on them finds
	// it.
	if err != nil || stopped {
		p.retire()
	} else {
		p.r.putIdle(p)
	}
	h.endRun(err)
}

// endRun ends a reused worker's launch: err is its failure, nil when it reached its target or
// was stopped.
func (h *handle) endRun(err error) {
	if err != nil {
		h.recordFailure(err)
	}
	close(h.reports)
	go h.conclude()
}

// signal signals the process while it serves h, and never after: by then it may serve another
// trial.
func (p *reused) signal(h *handle, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == h {
		syscall.Kill(-p.w.pid(), sig)
	}
}

// retire closes the process's input, which ends it, and kills it if it has not exited within the
// grace period.
func (p *reused) retire() {
	p.stdin.Close()
	go func() {
		select {
		case <-p.gone:
		case <-time.After(p.r.grace()):
			syscall.Kill(-p.w.pid(), syscall.SIGKILL)
		}
	}()
}

// output routes the process's output to the log of the launch it serves, or, while it is idle,
// to the runtime's log.
type output struct{ p *reused }

func (o output) Write(b []byte) (int, error) {
	if h := o.p.serving(); h != nil {
		return h.log.Write(b)
	}
	o.p.r.logf("reused worker %d (idle): %s", o.p.w.pid(), strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func (r *Runtime) takeIdle(key string) *reused {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	ps := r.pool.idle[key]
	if len(ps) == 0 {
		return nil
	}
	p := ps[len(ps)-1]
	r.pool.idle[key] = ps[:len(ps)-1]
	p.idle.Stop()
	return p
}

// putIdle keeps p for the next launch on its key, for IdleTimeout at most.
func (r *Runtime) putIdle(p *reused) {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	if r.pool.closed {
		p.retire()
		return
	}
	if r.pool.idle == nil {
		r.pool.idle = map[string][]*reused{}
	}
	r.pool.idle[p.key] = append(r.pool.idle[p.key], p)
	timeout := r.IdleTimeout
	if timeout <= 0 {
		timeout = DefaultIdleTimeout
	}
	p.idle = time.AfterFunc(timeout, func() {
		if r.dropIdle(p) {
			p.retire()
		}
	})
}

// dropIdle takes p out of the pool; false when it was not there.
func (r *Runtime) dropIdle(p *reused) bool {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	ps := r.pool.idle[p.key]
	for i, q := range ps {
		if q == p {
			r.pool.idle[p.key] = append(ps[:i:i], ps[i+1:]...)
			return true
		}
	}
	return false
}

// Close ends every idle reused worker and waits until they have exited (the grace period at
// most, then they are killed); workers that serve a launch end with it. Then it ends whatever
// ended workers left behind that is still there. Launches after Close start processes that are
// not kept. Then the workers' cgroup is killed and removed, and in a Sandbox every process of
// its uid is killed.
func (r *Runtime) Close() error {
	r.pool.mu.Lock()
	r.pool.closed = true
	var all []*reused
	for _, ps := range r.pool.idle {
		for _, p := range ps {
			p.idle.Stop()
			all = append(all, p)
		}
	}
	r.pool.idle = nil
	r.pool.mu.Unlock()
	for _, p := range all {
		p.retire()
	}
	for _, p := range all {
		<-p.gone
	}
	r.endLeftovers()
	if err := r.endCgroup(); err != nil { // the run's end: its cgroup goes, whatever is in it
		r.logf("%v", err)
	}
	if r.Sandbox != nil { // the run is over: nothing of its uid may outlive it
		if err := r.Sandbox.EndAll(); err != nil {
			r.logf("%v", err)
			return err
		}
	}
	return nil
}

// endLeftovers ends whatever a worker of this runtime left behind that is still there (each
// worker's own exit ended what it found then): every process carrying a token of this runtime
// but no live worker's.
func (r *Runtime) endLeftovers() {
	r.workers.mu.Lock()
	prefix := r.workers.prefix
	live := map[string]bool{}
	for _, w := range r.workers.live {
		live[w.token] = true
	}
	r.workers.mu.Unlock()
	if prefix == "" {
		return // no worker was ever started
	}
	ended := r.endStrays(selector{token: func(t string) bool { return strings.HasPrefix(t, prefix) && !live[t] }})
	if len(ended) > 0 {
		r.logf("ended %s that workers of this run left behind", describe(ended))
	}
}
