package ui

import (
	"fmt"
	"net"
)

// Listen listens for the dashboard at addr, and returns the token every request must bear
// (token, or a new one when addr reaches beyond loopback and none is given) and the URL that
// opens the dashboard with it.
func Listen(addr, token string) (ln net.Listener, tok, url string, err error) {
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, "", "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	if !Loopback(ln.Addr()) && token == "" {
		if token, err = NewToken(); err != nil {
			ln.Close()
			return nil, "", "", err
		}
	}
	url = "http://" + ln.Addr().String() + "/"
	if token != "" {
		url += "?token=" + token
	}
	return ln, token, url, nil
}
