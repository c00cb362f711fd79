package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// maxCodeBody bounds an uploaded code bundle: compressed, it is at most its files' cap, plus
// the tar and gzip framing of as many files as a bundle may hold.
const maxCodeBody = codebundle.DefaultMaxBytes + codebundle.DefaultMaxFiles*1024

// MaxTeamBundles bounds the bundles a team's folder keeps: past it the least recently stored
// go. They are a cache (a submission unpacks its bundle into its run's folder at once), so a
// client whose bundle went sends it again.
const MaxTeamBundles = 32

// codePath is where the server keeps team's bundle id: in the team's own folder, which no other
// team's request ever names (every lookup is by the caller's team).
func (s *Server) codePath(team, id string) string {
	return filepath.Join(s.cfg.Root, "teams", team, "code", id+".tar.gz")
}

// headCode answers whether the caller's team has bundle id already (200) or not (404): the
// client uploads a folder only when it changed.
func (s *Server) headCode(w http.ResponseWriter, r *http.Request, u store.User) {
	id := r.PathValue("id")
	if !codebundle.ValidID(id) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a code bundle ID (64 hex digits)", id))
		return
	}
	if _, err := os.Stat(s.codePath(u.Team, id)); err != nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// putCode stores the bundle in the body as the caller's team's bundle id, once it unpacked
// within bounds to files that hash to id.
func (s *Server) putCode(w http.ResponseWriter, r *http.Request, u store.User) {
	id := r.PathValue("id")
	if !codebundle.ValidID(id) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a code bundle ID (64 hex digits)", id))
		return
	}
	err := s.storeCode(r.Context(), u.Team, id, http.MaxBytesReader(w, r.Body, maxCodeBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the code bundle is over %d bytes", maxCodeBody))
	case errors.Is(err, codebundle.ErrBadBundle):
		writeError(w, http.StatusUnprocessableEntity, err)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		s.record(r.Context(), u, "code", "", id)
		writeJSON(w, http.StatusCreated, map[string]string{"code": id})
	}
}

// storeCode checks body (unpacked into a scratch folder, bounded) and keeps it as team's
// bundle id.
func (s *Server) storeCode(ctx context.Context, team, id string, body io.Reader) error {
	dst := s.codePath(team, id)
	if err := rundir.Mkdir(filepath.Dir(dst)); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	scratch, err := os.MkdirTemp(filepath.Dir(dst), ".check-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if _, err := codebundle.UnpackAs(io.TeeReader(body, tmp), filepath.Join(scratch, "code"), id, codebundle.Limits{}); err != nil {
		return err
	}
	if _, err := io.Copy(tmp, body); err != nil { // what follows the gzip stream, if anything
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	return pruneBundles(filepath.Dir(dst), MaxTeamBundles)
}

// pruneBundles removes the oldest bundles of a team's folder beyond keep.
func pruneBundles(dir string, keep int) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if err != nil || len(paths) <= keep {
		return err
	}
	type bundle struct {
		path string
		at   time.Time
	}
	var all []bundle
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			all = append(all, bundle{p, st.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	for _, b := range all[min(keep, len(all)):] {
		if err := os.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// unpackCode unpacks team's bundle id into the run folder dir (rundir.CodeDir), given to the
// run's sandbox when it has one, and returns the folder relative to dir (RunFile.Workdir).
func (s *Server) unpackCode(team, id, dir string, sandbox *process.Sandbox) (string, error) {
	if !codebundle.ValidID(id) {
		return "", &InputError{Err: fmt.Errorf("code: %q is not a code bundle ID (64 hex digits)", id)}
	}
	f, err := os.Open(s.codePath(team, id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", &InputError{Err: fmt.Errorf("code %s was not uploaded: PUT /api/v1/code/%s first", id, id)}
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	code := filepath.Join(dir, rundir.CodeDir)
	if _, err := codebundle.UnpackAs(f, code, id, codebundle.Limits{}); err != nil {
		return "", fmt.Errorf("unpack code %s: %w", id, err)
	}
	if sandbox != nil {
		if err := sandbox.Give(code); err != nil {
			return "", err
		}
	}
	return rundir.CodeDir, nil
}
