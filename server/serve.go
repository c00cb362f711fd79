package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long the HTTP server waits for its requests once the drivers are
// stopped.
const shutdownGrace = 5 * time.Second

// Serve answers the API and the dashboard on ln, bounded by limits (over TLS with tlsCert and
// tlsKey, when given), and drives the runs (Run) until ctx ends or serving fails. Run stops
// the drivers, copies what they left to the mirror and gives the lease up before the HTTP
// server shuts down, so the database must stay open until Serve returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener, limits HTTPLimits, tlsCert, tlsKey string) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	hs := limits.HTTPServer(ctx, s.Handler())
	ln = limits.Listen(ln)
	errc := make(chan error, 1)
	go func() {
		if tlsCert != "" {
			errc <- hs.ServeTLS(ln, tlsCert, tlsKey)
			return
		}
		errc <- hs.Serve(ln)
	}()
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	stop()
	<-ran
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	hs.Shutdown(sctx)
	return nil
}
