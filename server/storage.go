package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
)

// storageLocation is a checkpoint store or a folder: file with an absolute, clean path whose
// symlinks are resolved, or s3 with a bucket and a key prefix ("" for the whole bucket).
type storageLocation struct {
	scheme, bucket, path string
}

// within says whether l lies in p: the same scheme (and bucket), and l's path p's or below it,
// segment by segment (s3://b/team is not within s3://b/te).
func (l storageLocation) within(p storageLocation) bool {
	if l.scheme != p.scheme || l.bucket != p.bucket {
		return false
	}
	switch {
	case p.path == "" || l.path == p.path:
		return true
	case p.path == "/":
		return strings.HasPrefix(l.path, "/")
	}
	return strings.HasPrefix(l.path, p.path+"/")
}

func (l storageLocation) String() string {
	if l.scheme == "s3" {
		return "s3://" + l.bucket + "/" + l.path
	}
	return "file://" + l.path
}

// parseStorage reads a checkpoints URL or storage prefix: file:///ABS/DIR (a path without '..'
// segments, symlinks resolved as far as it exists) or s3://BUCKET/PREFIX (as a spec takes it).
func parseStorage(url string) (storageLocation, error) {
	scheme, dirOrBucket, prefix, err := spec.ParseCheckpoints(url)
	if err != nil {
		return storageLocation{}, err
	}
	if url == "" {
		return storageLocation{}, errors.New("empty")
	}
	if scheme == "s3" {
		return storageLocation{scheme: "s3", bucket: dirOrBucket, path: prefix}, nil
	}
	dir, err := resolvePath(dirOrBucket)
	if err != nil {
		return storageLocation{}, err
	}
	return storageLocation{scheme: "file", path: dir}, nil
}

// resolvePath is an absolute path without '..' segments, cleaned, with the symlinks of its
// longest existing ancestor resolved: where a write under it would land.
func resolvePath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path", p)
	}
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == ".." {
			return "", fmt.Errorf("%q holds a '..' segment", p)
		}
	}
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; cur = filepath.Dir(cur) {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			// It is there but leads nowhere: a link to a place not made yet, which could be
			// anywhere once it is (another team's folder).
			return "", fmt.Errorf("%s is a link to a place that does not exist", cur)
		}
		if cur == filepath.Dir(cur) {
			return p, nil
		}
		// A missing part may not be a symlink; what is under it is made by the run.
		rest = append([]string{filepath.Base(cur)}, rest...)
	}
}

// CheckStoragePrefix says whether prefix is a storage prefix a team may be given.
func CheckStoragePrefix(prefix string) error {
	if _, err := parseStorage(prefix); err != nil {
		return fmt.Errorf("storage prefix %q: %w (file:///DIR or s3://BUCKET/PREFIX)", prefix, err)
	}
	return nil
}

// CheckStorage says whether exp reads and writes only where its team may: checkpoints.url (the
// run's own folder when unset) and each sampler.warm_start given as a path must lie under one
// of the team's storage prefixes, and never inside root, the server's folder (every team's
// runs, the database, the server's files). A warm start named by its run's name or ID is one of
// the team's own runs. The problems name the field and its line.
func CheckStorage(team store.Team, root string, exp *spec.Experiment) error {
	realRoot, err := resolvePath(root)
	if err != nil {
		return fmt.Errorf("the server's root: %w", err)
	}
	rootLoc := storageLocation{scheme: "file", path: realRoot}
	var probs spec.Problems
	add := func(path, format string, args ...any) {
		probs = append(probs, spec.Problem{File: exp.File, Line: exp.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	allowed := func(path, url string) {
		loc, err := parseStorage(url)
		switch {
		case err != nil:
			add(path, "%v", err)
		case loc.within(rootLoc) || rootLoc.within(loc):
			add(path, "%s is inside this server's root, where every team's runs are: name a place under team %s's storage prefixes", url, team.Name)
		default:
			for _, p := range team.StoragePrefixes {
				if pl, err := parseStorage(p); err == nil && loc.within(pl) {
					return
				}
			}
			if len(team.StoragePrefixes) == 0 {
				add(path, "%s: team %s has no storage prefixes; leave it out (the run's own folder) or ask an admin for one (rubberband server teams set %s --storage-prefix URL)", url, team.Name, team.Name)
				return
			}
			add(path, "%s is not under team %s's storage prefixes (%s)", url, team.Name, strings.Join(team.StoragePrefixes, ", "))
		}
	}
	if url := exp.Checkpoints.URL; url != "" {
		allowed("checkpoints.url", url)
	}
	for i, ws := range exp.Sampler.WarmStart {
		path := fmt.Sprintf("sampler.warm_start[%d]", i)
		switch {
		case ws == "." || ws == "..":
			add(path, "%q is not a run's name or ID", ws)
		case strings.ContainsAny(ws, `/\`):
			allowed(path, "file://"+strings.TrimPrefix(ws, "file://"))
		}
	}
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// storageMoved checks again, as its driver is about to start, where a queued run reads and
// writes (CheckStorage): a checkpoints.url or warm start that lay under its team's prefixes at
// submission may resolve elsewhere now, through a link planted in the prefix while it waited
// (into another team's runs, say), or the team may have lost the prefix. A run whose folder is
// not on this machine (a mirror restores it) was checked at submission only.
func (s *Server) storageMoved(ctx context.Context, r store.Run) error {
	st, err := rundir.Open(s.runDir(r.Team, r.ID))
	if err != nil {
		return nil
	}
	team, err := s.cfg.Store.Team(ctx, r.Team)
	if err != nil {
		return fmt.Errorf("team %s: %w", r.Team, err)
	}
	return CheckStorage(team, s.cfg.Root, st.Exp)
}
