package server

import (
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rubberband-hpo/rubberband/spec"
)

func TestBoundText(t *testing.T) {
	if got := boundText("short", 10); got != "short" {
		t.Errorf("a short text: %q", got)
	}
	long := strings.Repeat("é", 100) // two bytes a rune: a cut must not split one
	got := boundText(long, 51)
	if len(got) > 51 || !utf8.ValidString(got) || !strings.HasSuffix(got, truncatedMarker) {
		t.Errorf("cut to 51: %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got)
	}
}

func TestProblemsErrorIsBounded(t *testing.T) {
	var probs spec.Problems
	for range 3 * MaxProblems {
		probs = append(probs, spec.Problem{File: strings.Repeat("f", 10<<10), Line: 1, Path: "x", Msg: "unknown"})
	}
	ie := problemsError(strings.Repeat("f", 10<<10), probs)
	if len(ie.Problems) != MaxProblems+1 || ie.Problems[MaxProblems] != "… and 200 more problems" {
		t.Fatalf("%d problems, the last %q", len(ie.Problems), ie.Problems[len(ie.Problems)-1])
	}
	for _, p := range ie.Problems {
		if len(p) > MaxProblemBytes {
			t.Fatalf("a problem of %d bytes", len(p))
		}
	}
	if len(ie.Error()) > 2*MaxProblemBytes || !strings.HasSuffix(ie.Error(), "300 problems") {
		t.Errorf("its message: %d bytes, %.60q", len(ie.Error()), ie.Error())
	}
}

func TestHostsOf(t *testing.T) {
	hosts, err := HostsOf("https://RB.example:8443/x", []string{"rb.internal", " [::1] "})
	if err != nil || strings.Join(hosts, ",") != "rb.example,rb.internal,::1" {
		t.Fatalf("%v %v", hosts, err)
	}
	for _, bad := range []struct {
		url   string
		hosts []string
	}{{"rb.example", nil}, {"ftp://rb.example", nil}, {"", []string{"rb.example:80"}}, {"", []string{"https://rb.example"}}, {"", []string{""}}} {
		if _, err := HostsOf(bad.url, bad.hosts); err == nil {
			t.Errorf("%q %q: taken", bad.url, bad.hosts)
		}
	}
}

func TestCookieWriteOK(t *testing.T) {
	s := &Server{cfg: Config{Hosts: []string{"rb.example"}}}
	for _, c := range []struct {
		method, host string
		headers      map[string]string
		ok           bool
	}{
		{"GET", "evil.example", nil, true}, // reads are the dashboard's to judge
		{"POST", "rb.example", map[string]string{"Origin": "https://rb.example"}, true},
		{"POST", "rb.example:8443", map[string]string{"Origin": "https://rb.example:8443"}, true},
		{"POST", "localhost:8080", map[string]string{"Referer": "http://localhost:8080/runs/x"}, true},
		{"POST", "rb.example", map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		{"POST", "rb.example", map[string]string{"Origin": "https://rb.example:9999"}, false},
		{"POST", "rb.example", map[string]string{"Origin": "https://evil.example"}, false},
		{"DELETE", "rb.example", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://rb.example"}, false},
		{"PUT", "rb.example", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"POST", "rb.example", map[string]string{"Origin": "null"}, false},
		{"POST", "rb.example", nil, false},
		{"POST", "evil.example", map[string]string{"Origin": "http://evil.example"}, false}, // rebound
	} {
		r := httptest.NewRequest(c.method, "/api/v1/users", nil)
		r.Host = c.host
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if got := s.cookieWriteOK(r); got != c.ok {
			t.Errorf("%s Host %s %v: %v, want %v", c.method, c.host, c.headers, got, c.ok)
		}
	}
}

// The per-address bound holds at accept, and a closed connection gives its slot back.
func TestListenBoundsConnectionsPerAddress(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := HTTPLimits{MaxConnsPerIP: 2}.Listen(inner)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a, b := <-accepted, <-accepted
	third := dial()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third connection from one address: %v, want closed", err)
	}
	a.Close()
	a.Close() // twice: one slot back, not two
	dial()
	<-accepted
	fifth := dial()
	fifth.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fifth.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("over the bound again: %v, want closed", err)
	}
	b.Close()
}

// MaxConns bounds the connections of every address together.
func TestListenBoundsConnectionsInAll(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := HTTPLimits{MaxConnsPerIP: -1, MaxConns: 2}.Listen(inner)
	defer ln.Close()
	go func() {
		for {
			if _, err := ln.Accept(); err != nil {
				return
			}
		}
	}()
	var conns []net.Conn
	for _, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	conns[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[2].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third connection in all: %v, want closed", err)
	}
}
