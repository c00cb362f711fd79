package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// errNotPaused refuses to resume a run that is not paused.
var errNotPaused = errors.New("not paused")

// resumeRun queues a paused run again (POST /api/v1/runs/{id}/resume): a run an infrastructure
// fault stopped (a full disk, a checkpoint store down) holds no nodes and spent no tries; once
// the fault is mended it waits in its team's queue as any run does, and its driver carries on
// from its journal (`rubberband resume`). The server does not resume a paused run by itself: the
// fault is for someone to mend first, and a resume that meets it again pauses again. Only a
// paused run resumes (409 otherwise); another team's is not said to exist (404).
func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request, u store.User) {
	run, ok := s.run(w, r, u)
	if !ok {
		return
	}
	run, err := s.cfg.Store.UpdateRun(r.Context(), run.ID, func(x *store.Run) error {
		if x.State != store.Paused {
			return fmt.Errorf("%w: run %s is %s; only a paused run resumes", errNotPaused, x.ID, x.State)
		}
		x.State, x.EndedAt, x.Message = store.Queued, time.Time{}, "resumed by "+u.Name+" (paused: "+x.Message+")"
		return nil
	})
	if errors.Is(err, errNotPaused) {
		writeError(w, http.StatusConflict, err)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	s.record(r.Context(), u, "resume", run.ID, run.Message)
	s.poke()
	writeJSON(w, http.StatusAccepted, s.withStart(run))
}
