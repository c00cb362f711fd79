package ui

import (
	"strings"
	"testing"
)

// On loopback the dashboard needs no token unless given one, and its URL carries the token it
// needs; beyond loopback one is made; an address it cannot listen at is said.
func TestListen(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		wantToken   bool
	}{
		{"127.0.0.1:0", "", false},
		{"127.0.0.1:0", "s3cret", true},
		{"0.0.0.0:0", "", true},
	} {
		ln, tok, url, err := Listen(tc.addr, tc.token)
		if err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		ln.Close()
		if (tok != "") != tc.wantToken || (tc.token != "" && tok != tc.token) {
			t.Errorf("%s, %q: token %q", tc.addr, tc.token, tok)
		}
		want := "http://" + ln.Addr().String() + "/"
		if tok != "" {
			want += "?token=" + tok
		}
		if url != want {
			t.Errorf("%s: URL %q, want %q", tc.addr, url, want)
		}
	}
	if _, _, _, err := Listen("127.0.0.1:-1", ""); err == nil || !strings.HasPrefix(err.Error(), "listen on 127.0.0.1:-1: ") {
		t.Errorf("a bad address: %v", err)
	}
}
