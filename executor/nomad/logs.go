package nomad

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/internal/logcap"
)

// readTimeout bounds one read of a finished task's log (a node that went away answers nothing).
const readTimeout = 30 * time.Second

// logLag bounds how long a completed gang's rank 0 log is read again for its last report, every
// logLagPoll (collect).
const (
	logLag     = 15 * time.Second
	logLagPoll = 250 * time.Millisecond
)

// collect reads every worker's output once, now that the gang has ended: rank 0's standard
// output first, passing on the reports the live stream missed (it may stop short of the end, and
// the last report is the stage's metric), then closes Reports and Exited; then every other
// stream into the trial's log, LogDir/<trial>.log, under a header per worker. It returns why the
// allocation named failed failed, with the end of its standard error.
//
// A gang that completed (not stopped, none failed) reported its target iteration last; when
// rank 0's log does not hold that report yet, it is read again for up to logLag: the Docker
// driver ships a container's output to Nomad's log after the task has exited, and a read too
// early lost a stage's last reports (so the stage was retried from its checkpoint).
func (h *handle) collect(allocs []*nomad.AllocationListStub, failed string, completed bool) string {
	sort.SliceStable(allocs, func(i, j int) bool { return rankOf(allocs[i]) < rankOf(allocs[j]) })
	log, closeLog := h.openLog()
	defer closeLog()
	for _, a := range allocs {
		if a.TaskGroup == "rank-0" && a.ClientStatus != "lost" {
			section(log, a, "stdout")
			echo := &echoOnce{w: log}
			for start := time.Now(); ; {
				echo.pos = 0 // each read is from the start: what was written already is not written again
				h.read(a, "stdout", func(out io.Reader) {
					h.parse(out, echo, func(err error) { fmt.Fprintf(log, "rubberband: ignored a malformed report: %v\n", err) })
				})
				h.mu.Lock()
				behind := completed && h.lastIter < h.target
				h.mu.Unlock()
				if !behind || time.Since(start) > logLag {
					if behind {
						h.r.logf("trial %s: rank 0's log holds no report of iteration %d %s after the gang completed", h.trial, h.target, logLag)
					}
					break
				}
				time.Sleep(logLagPoll)
			}
		}
	}
	close(h.reports)
	close(h.exited)
	keep := h.r.LogDir != ""
	why := ""
	for _, a := range allocs {
		if a.ClientStatus == "lost" { // its output went with its node
			fmt.Fprintf(log, "=== rank %d on node %s, allocation %s (lost): no output, the node is gone\n", rankOf(a), a.NodeName, a.ID)
			if a.ID == failed {
				why = fmt.Sprintf("task group %s lost on node %s", a.TaskGroup, a.NodeName)
			}
			continue
		}
		if keep && a.TaskGroup != "rank-0" {
			section(log, a, "stdout")
			h.read(a, "stdout", func(out io.Reader) { io.Copy(log, out) })
		}
		if keep || a.ID == failed {
			section(log, a, "stderr")
			tail := &tailWriter{max: 600}
			h.read(a, "stderr", func(out io.Reader) { io.Copy(io.MultiWriter(log, tail), out) })
			if a.ID == failed {
				why = fmt.Sprintf("task group %s %s on node %s%s", a.TaskGroup, a.ClientStatus, a.NodeName, tail.String())
			}
		}
	}
	return why
}

// openLog opens the trial's log for appending, with the gang's header written; without a LogDir
// (or when it cannot be opened) output is discarded.
func (h *handle) openLog() (io.Writer, func()) {
	if h.r.LogDir == "" {
		return io.Discard, func() {}
	}
	if err := os.MkdirAll(h.r.LogDir, 0o755); err != nil {
		h.r.logf("trial %s: keep its log: %v", h.trial, err)
		return io.Discard, func() {}
	}
	f, err := logcap.Open(filepath.Join(h.r.LogDir, h.trial+".log"), h.r.LogMax, 0o600)
	if err != nil {
		h.r.logf("trial %s: keep its log: %v", h.trial, err)
		return io.Discard, func() {}
	}
	io.WriteString(f, h.header)
	return f, func() { f.Close() }
}

func section(w io.Writer, a *nomad.AllocationListStub, stream string) {
	fmt.Fprintf(w, "=== rank %d on node %s, allocation %s (%s): %s\n", rankOf(a), a.NodeName, a.ID, a.ClientStatus, stream)
}

// rankOf reads a worker's rank from its task group's name, rank-N.
func rankOf(a *nomad.AllocationListStub) int {
	n, err := strconv.Atoi(strings.TrimPrefix(a.TaskGroup, "rank-"))
	if err != nil {
		return -1
	}
	return n
}

// read hands use the whole of one of a finished task's logs, bounded by readTimeout; a read cut
// short by it is said, since what it did not reach (a last report) is lost.
func (h *handle) read(a *nomad.AllocationListStub, stream string, use func(io.Reader)) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	use(h.stream(ctx, a, stream, false))
	if ctx.Err() != nil {
		h.r.logf("trial %s: reading the %s of rank %d (allocation %s) stopped after %s: what came after is not read", h.trial, stream, rankOf(a), a.ID, readTimeout)
	}
}

// stream reads one of a task's logs from its start; with follow it goes on as the log grows,
// until ctx ends (followLog).
func (h *handle) stream(ctx context.Context, a *nomad.AllocationListStub, stream string, follow bool) io.Reader {
	alloc := &nomad.Allocation{ID: a.ID, NodeID: a.NodeID}
	open := func(offset int64) (<-chan *nomad.StreamFrame, <-chan error) {
		return h.r.Client.AllocFS().Logs(alloc, follow, "trainer", stream, "start", offset, ctx.Done(), (&nomad.QueryOptions{}).WithContext(ctx))
	}
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		if !follow {
			frames, errs := open(0)
			copyFrames(ctx, pw, frames, errs)
			return
		}
		followLog(ctx, pw, open, h.r.poll(), func(err error) {
			h.r.logf("trial %s: reading rank %d's %s (allocation %s): %v; reading on from where it stopped", h.trial, rankOf(a), stream, a.ID, err)
		})
	}()
	return pr
}

// taskLog opens a task's log from offset bytes after its start (Nomad's AllocFS.Logs).
type taskLog func(offset int64) (<-chan *nomad.StreamFrame, <-chan error)

// followLog writes a followed log to w until ctx ends. A stream that ends sooner is opened again
// from the byte it reached, after pause: Nomad refuses a task's log until the client has marked
// the task started, which under make test's load came after the allocation was seen running,
// and a connection may drop; a report stream that ended there left its gang training, nothing
// reported, until its budget ran out (likely what failed every Nomad test of one CI run). broke
// hears the first error, once.
func followLog(ctx context.Context, w io.Writer, open taskLog, pause time.Duration, broke func(error)) {
	cw := &countWriter{w: w}
	said := false
	for {
		frames, errs := open(cw.n)
		early, err := copyFrames(ctx, cw, frames, errs)
		if early || ctx.Err() != nil {
			return
		}
		if err != nil && !said {
			said = true
			broke(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// copyFrames writes the frames' data to w until the stream ends (with the error that ended it,
// if any), or until ctx ends (passing on what is buffered already) or w fails: then it reports
// early, having let the API's reader end, as it may be blocked handing over a frame.
func copyFrames(ctx context.Context, w io.Writer, frames <-chan *nomad.StreamFrame, errs <-chan error) (early bool, err error) {
	if early, err = copyUntil(ctx, w, frames, errs); early {
		for {
			select {
			case _, ok := <-frames:
				if !ok {
					return true, nil
				}
			case <-errs:
				return true, nil
			}
		}
	}
	return false, err
}

// copyUntil is copyFrames but for letting the API's reader end.
func copyUntil(ctx context.Context, w io.Writer, frames <-chan *nomad.StreamFrame, errs <-chan error) (early bool, err error) {
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return false, nil
			}
			if f != nil {
				if _, err := w.Write(f.Data); err != nil {
					return true, nil
				}
			}
		case err := <-errs: // the API's reader may have handed over frames before it failed
			flushFrames(w, frames)
			return false, err
		case <-ctx.Done():
			return flushFrames(w, frames), nil
		}
	}
}

// flushFrames writes the frames already handed over; it reports whether the stream is still
// open.
func flushFrames(w io.Writer, frames <-chan *nomad.StreamFrame) (open bool) {
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return false
			}
			if f != nil {
				w.Write(f.Data)
			}
		default:
			return true
		}
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String is the tail as the end of a failure message: ": <text>", or nothing.
func (t *tailWriter) String() string {
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return ": " + s
}

// echoOnce passes on what is written beyond what it passed on before, counting from pos: a log
// read again from its start is echoed once.
type echoOnce struct {
	w            io.Writer
	pos, written int64
}

func (e *echoOnce) Write(p []byte) (int, error) {
	n, start := len(p), e.pos
	e.pos += int64(n)
	if e.pos <= e.written {
		return n, nil
	}
	if start < e.written {
		p = p[e.written-start:]
	}
	e.written = e.pos
	_, err := e.w.Write(p)
	return n, err
}
