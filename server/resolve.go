package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// errAmbiguous: a RUN argument that names several of the caller's runs (a name submitted twice,
// or the start of several IDs); its message lists their IDs.
var errAmbiguous = errors.New("ambiguous run")

// Lookup finds the run arg names for u, as the CLI's RUN argument does on this machine: its ID
// (any team's: a caller is told apart from a stranger by mayAccess), or among the runs u may
// see, its name or an unambiguous start of its ID (4 characters at least). A name that several
// runs have is refused (errAmbiguous) with their IDs, newest first.
func Lookup(ctx context.Context, st store.Store, u store.User, arg string) (store.Run, error) {
	run, err := st.Run(ctx, arg)
	if !errors.Is(err, store.ErrNotFound) {
		return run, err
	}
	f := store.RunFilter{Team: u.Team}
	if u.Admin {
		f.Team = ""
	}
	runs, err := st.Runs(ctx, f)
	if err != nil {
		return store.Run{}, err
	}
	var named, prefixed []store.Run
	for _, r := range runs {
		switch {
		case r.Name == arg:
			named = append(named, r)
		case rundir.IDMatches(r.ID, arg):
			prefixed = append(prefixed, r)
		}
	}
	matches, what := named, "names"
	if len(matches) == 0 {
		matches, what = prefixed, "is the start of the IDs of"
	}
	switch len(matches) {
	case 0:
		return store.Run{}, &lookupError{store.ErrNotFound, fmt.Sprintf("no run %q: not a run's ID, nor the name or the start of the ID of a run of team %s (`rubberband list` shows them)", arg, u.Team)}
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for i := range matches {
		r := matches[len(matches)-1-i] // newest first: the one most likely meant
		ids[i] = fmt.Sprintf("%s (%s, %s)", r.ID, r.State, r.SubmittedAt.Format("2006-01-02 15:04"))
	}
	return store.Run{}, &lookupError{errAmbiguous, fmt.Sprintf("%q %s %d runs: %s; give its ID", arg, what, len(matches), strings.Join(ids, ", "))}
}

// lookupError says in its own words what Lookup did not find, and matches kind.
type lookupError struct {
	kind error
	msg  string
}

func (e *lookupError) Error() string        { return e.msg }
func (e *lookupError) Is(target error) bool { return target == e.kind }
