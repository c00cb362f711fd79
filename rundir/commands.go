package rundir

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// WriteEnd writes how a run ended as `run` and `resume` print it, here as on a server: what
// `report` prints of the result res (Replayed.WriteReport: its tables and what its search found,
// or as JSON); and returns its report (runstate.Compare), which says whether it missed its
// deadline.
func WriteEnd(w io.Writer, st *State, res *runstate.Result, asJSON bool) (runstate.Report, error) {
	rep := runstate.Compare(st.Plan, res)
	events, err := journal.ReadJournal(filepath.Join(st.Dir, Journal))
	if err != nil {
		return rep, err
	}
	return rep, replayed(st, res, events).WriteReport(w, asJSON)
}

// StatusNow draws the run's status once (RenderStatus of a fresh View), and says whether a
// driver holds the run now: what `status` prints, and redraws with --watch until it does not.
func StatusNow(st *State, o StatusOptions) ([]byte, bool, error) {
	return cachedDraw(st, fmt.Sprintf("status %+v", o), func() ([]byte, bool, error) {
		v, err := NewView(st)
		if err != nil {
			return nil, false, err
		}
		out, err := RenderStatus(v, o)
		return out, v.Live, err
	})
}

// BestNow is the run's winner as its journal says now (Best of a fresh View).
func BestNow(st *State) (*BestTrial, error) {
	v, err := NewView(st)
	if err != nil {
		return nil, err
	}
	return Best(v)
}

// Report writes the run's report to w, as JSON or as tables (`rubberband report`), after
// drawing its pictures into the folder plots (made when missing; none when empty).
func Report(st *State, w io.Writer, asJSON bool, plots string) error {
	if plots == "" { // a finished run's report is kept in its view cache
		out, _, err := cachedDraw(st, fmt.Sprintf("report json=%v", asJSON), func() ([]byte, bool, error) {
			r, err := Replay(st)
			if err != nil {
				return nil, false, err
			}
			var buf bytes.Buffer
			err = r.WriteReport(&buf, asJSON)
			_, live, herr := ReadHolder(st.Dir)
			// Replay measures a run that has not finished up to now: its report is not kept.
			return buf.Bytes(), live || herr != nil || !r.Res.Finished, err
		})
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	r, err := Replay(st)
	if err != nil {
		return err
	}
	if plots != "" {
		if err := os.MkdirAll(plots, 0o755); err != nil {
			return err
		}
		if err := r.Plot(plots); err != nil {
			return err
		}
	}
	return r.WriteReport(w, asJSON)
}
