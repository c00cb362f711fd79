package ui

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// update is one re-rendering of a page's live sections: what a stream pushes.
type update struct {
	Version  int                      `json:"version"` // counts renderings that changed something
	Seq      int                      `json:"seq"`     // journal records read so far (0 on the runs page)
	Sections map[string]template.HTML `json:"sections"`
	// changed are the sections that differ from version Version-1's: all a stream that holds
	// that version is sent (nil: send all of them). A page's script replaces the sections it is
	// sent and keeps the others.
	changed map[string]template.HTML
}

// to is what a stream that holds version have is sent of u.
func (u *update) to(have int) *update {
	if u.changed != nil && have == u.Version-1 {
		return &update{Version: u.Version, Seq: u.Seq, Sections: u.changed}
	}
	return u
}

// feed holds a page's latest update and hands it to its streams. A slow stream skips to the
// latest update rather than queueing old ones.
type feed struct {
	mu      sync.Mutex
	latest  *update
	subs    map[chan *update]struct{}
	running bool // a poller refreshes the feed while it has streams
}

func (f *feed) publish(u *update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latest = u
	for ch := range f.subs {
		select {
		case <-ch: // drop the stale one
		default:
		}
		ch <- u
	}
}

// subscribe adds a stream; start says whether the caller must start the poller.
func (f *feed) subscribe() (ch chan *update, start bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[chan *update]struct{}{}
	}
	ch = make(chan *update, 1)
	f.subs[ch] = struct{}{}
	start = !f.running
	f.running = true
	return ch, start
}

func (f *feed) unsubscribe(ch chan *update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
}

// idle says whether no stream is left, and if so marks the poller stopped.
func (f *feed) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) == 0 {
		f.running = false
		return true
	}
	return false
}

// poll calls refresh every period while the feed has streams.
func (s *Server) poll(f *feed, period time.Duration, refresh func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			f.idle()
			return
		case <-t.C:
		}
		if f.idle() {
			return
		}
		refresh()
	}
}

// stream serves one page's Server-Sent Events: the latest update at once when the page has an
// older one (?v=), then each new one. Streams are bounded; a page over the bound is refused and
// its script retries.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, f *feed, period time.Duration, refresh func()) {
	client := clientOf(r)
	if !s.holdStream(client) {
		http.Error(w, fmt.Sprintf("too many live pages open from %s: at most %d per client (close some)", client, s.cfg.MaxStreamsPerClient),
			http.StatusTooManyRequests)
		return
	}
	defer s.releaseStream(client)
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		http.Error(w, "too many live pages open", http.StatusServiceUnavailable)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	have, _ := strconv.Atoi(r.URL.Query().Get("v"))
	if id, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil {
		have = id
	}
	ch, start := f.subscribe()
	defer f.unsubscribe(ch)
	if start {
		go s.poll(f, period, refresh)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()
	refresh()
	f.mu.Lock()
	latest := f.latest
	f.mu.Unlock()
	send := func(u *update) bool {
		if u == nil || u.Version == have {
			return true
		}
		b, err := json.Marshal(u.to(have))
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: update\ndata: %s\n\n", u.Version, b); err != nil {
			return false
		}
		flusher.Flush()
		have = u.Version
		return true
	}
	if !send(latest) {
		return
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case u := <-ch:
			if !send(u) {
				return
			}
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// clientOf is the address a request came from, as the connection says (a header could say
// anything).
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// holdStream counts one more live stream of client, unless it holds MaxStreamsPerClient.
func (s *Server) holdStream(client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[client] >= s.cfg.MaxStreamsPerClient {
		return false
	}
	s.perClient[client]++
	return true
}

func (s *Server) releaseStream(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[client]--; s.perClient[client] <= 0 {
		delete(s.perClient, client)
	}
}
