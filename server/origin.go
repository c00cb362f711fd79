package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HostsOf is the host names a server answers its dashboard on besides loopback: publicURL's
// (the address its users reach it at, "" if none) and the others given. An error names the bad one.
func HostsOf(publicURL string, others []string) ([]string, error) {
	var hosts []string
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return nil, fmt.Errorf("public URL %q: an http:// or https:// URL with a host name", publicURL)
		}
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	for _, h := range others {
		name := strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]"))
		if name == "" || (net.ParseIP(name) == nil && strings.ContainsAny(name, "/:@ ?#[]")) {
			return nil, fmt.Errorf("host %q: a host name or IP address, without scheme or port", h)
		}
		hosts = append(hosts, name)
	}
	return hosts, nil
}

// allowedHost says whether a request's Host names this server: a loopback name, or one of
// Config.Hosts. Any other name may be a DNS name an attacker points at the server's address
// (DNS rebinding), so that a page of theirs reads it as its own origin.
func (s *Server) allowedHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, h := range s.cfg.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

// errCrossOrigin refuses a write a browser may have been made to send by another site.
var errCrossOrigin = errors.New("forbidden: a write authenticated by the dashboard's cookie must come from this server's own pages (its Origin); scripts send the token as a bearer token instead")

// cookieWriteOK says whether a request authenticated by the dashboard's cookie may change
// anything: a safe method, or a write from this server's own origin. A browser sends the cookie
// with a form another site posts here (SameSite=Strict stops only other sites, not a sibling
// subdomain, and not every browser), but it says where the request comes from: Sec-Fetch-Site,
// or Origin, or Referer, which must name the very host the request was sent to, one of the
// server's own. A write that says nothing of its origin is refused: browsers always say.
func (s *Server) cookieWriteOK(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	if !s.allowedHost(r.Host) {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "":
	default:
		return false
	}
	for _, h := range []string{"Origin", "Referer"} {
		if o := r.Header.Get(h); o != "" {
			u, err := url.Parse(o)
			return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
		}
	}
	return false
}

// bearer says whether a request carries its token in its Authorization header, not a cookie.
func bearer(r *http.Request) bool { return r.Header.Get("Authorization") != "" }
