package server

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/ui"
)

// dashboard serves the dashboard (package ui) behind the API's tokens: a browser opens
// /?token=TOKEN once, which sets an HttpOnly cookie and drops the token from the address; each
// user sees their own team's runs (the dashboard of ROOT/teams/TEAM). Cancelling goes through the
// API (`rubberband cancel`), so that it is audited and scoped: the dashboard shows no cancel
// button here.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	if !s.allowedHost(r.Host) { // a name pointed at this server by someone else (DNS rebinding)
		http.Error(w, "this server answers its dashboard on localhost and the host names it was given (server --public-url, --allow-host) only", http.StatusForbidden)
		return
	}
	if token := r.URL.Query().Get("token"); token != "" {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		q := r.URL.Query()
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	user, err := Authenticate(r.Context(), s.cfg.Store, r)
	if err != nil {
		http.Error(w, "open this page as /?token=TOKEN (`rubberband server users add` printed it)", http.StatusUnauthorized)
		return
	}
	d, err := s.teamDashboard(user.Team)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	d.ServeHTTP(w, r)
}

// teamDashboard is team's dashboard, made on first use.
func (s *Server) teamDashboard(team string) (*ui.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.dashboards[team]; ok {
		return d, nil
	}
	root := s.runDir(team, "")
	if err := rundir.Mkdir(root); err != nil {
		return nil, fmt.Errorf("team %s's folder: %w", team, err)
	}
	d, err := ui.New(ui.Config{Root: root, Log: s.cfg.Log, Hosts: s.cfg.Hosts})
	if err != nil {
		return nil, err
	}
	s.dashboards[team] = d
	return d, nil
}

// Close ends the dashboards' live streams.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dashboards {
		d.Close()
	}
}
