package kubenode

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// logFile is a pod's stdout and stderr, one file, bounded; readers follow it until it is done.
type logFile struct {
	path, container string
	uid             types.UID // the pod's: a pod of the same name made anew has no log yet
	max             int64

	mu      sync.Mutex
	f       *os.File
	size    int64
	full    bool
	changed chan struct{} // closed and replaced on each write
	done    chan struct{} // closed when the process's output ended
}

func newLogFile(path, container string, uid types.UID, max int64) (*logFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return &logFile{path: path, container: container, uid: uid, max: max, f: f, changed: make(chan struct{}), done: make(chan struct{})}, nil
}

// copyFrom writes the process's output to the file until every writer closed the pipe.
func (l *logFile) copyFrom(pr *os.File) {
	defer l.finish()
	defer pr.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			l.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// write appends to the file, which stops growing at max, saying so.
func (l *logFile) write(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full {
		return
	}
	if room := l.max - l.size; int64(len(b)) > room {
		b = append(b[:room:room], fmt.Sprintf("\n[kubenode: this log reached %d bytes; the rest of the output is dropped]\n", l.max)...)
		l.full = true
	}
	n, _ := l.f.Write(b)
	l.size += int64(n)
	close(l.changed)
	l.changed = make(chan struct{})
}

// finish marks the output ended (idempotent through the process's one copier, or a failed start).
func (l *logFile) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
	select {
	case <-l.done:
	default:
		close(l.done)
	}
}

// waitCopied waits for the output to end, at most d (a process that escaped its group may keep
// the pipe open).
func (l *logFile) waitCopied(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}

// wake is the channel closed on the next write.
func (l *logFile) wake() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// serveLogs is the kubelet API's GET /containerLogs/{namespace}/{pod}/{container}, what the API
// server's pods/log proxies to (k8s.io/kubernetes pkg/registry/core/pod LogLocation): follow,
// tailLines and limitBytes are honoured; timestamps, sinceSeconds, sinceTime and stream are not.
func (a *Agent) serveLogs(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	a.mu.Lock()
	l := a.logs[ns+"/"+pod]
	a.mu.Unlock()
	if l != nil {
		if obj, ok, _ := a.pods.GetStore().GetByKey(ns + "/" + pod); ok && obj.(*corev1.Pod).UID != l.uid {
			l = nil
		}
	}
	if l == nil || l.container != container {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, pod), http.StatusBadRequest)
		return
	}
	q := req.URL.Query()
	follow := q.Get("follow") == "true"
	limit := int64(-1)
	if s := q.Get("limitBytes"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			http.Error(w, "bad limitBytes", http.StatusBadRequest)
			return
		}
		limit = n
	}
	f, err := os.Open(l.path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	if s := q.Get("tailLines"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad tailLines", http.StatusBadRequest)
			return
		}
		off, err := tailOffset(f, n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		wake, ended := l.wake(), false
		select {
		case <-l.done:
			// Every write happened: the reads below get the rest, then the end.
			ended = true
		default:
		}
		n, err := f.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if limit >= 0 && int64(n) > limit {
				chunk = chunk[:limit]
			}
			if _, werr := w.Write(chunk); werr != nil {
				return
			}
			if limit >= 0 {
				if limit -= int64(len(chunk)); limit == 0 {
					return
				}
			}
			if flusher != nil {
				flusher.Flush()
			}
			continue
		}
		if (err != nil && err != io.EOF) || !follow || ended {
			return
		}
		select {
		case <-l.done:
		case <-wake:
		case <-req.Context().Done():
			return
		}
	}
}

// tailOffset is where the last n lines of f begin (a last line without a newline counts).
func tailOffset(f *os.File, n int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	if n == 0 {
		return end, nil
	}
	const block = 32 << 10
	buf := make([]byte, block)
	pos, lines := end, int64(0)
	first := true
	for pos > 0 {
		size := int64(block)
		if pos < size {
			size = pos
		}
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && err != io.EOF {
			return 0, err
		}
		chunk := buf[:size]
		if first && len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			// The file's final newline ends the last line, it does not start another.
			chunk = chunk[:len(chunk)-1]
		}
		first = false
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				if lines++; lines == n {
					return pos + int64(i) + 1, nil
				}
			}
		}
	}
	return 0, nil
}
