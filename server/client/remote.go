package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// ExitCode is the CLI's exit code for a server's answer that the user must act on:
// driver.ExitInfeasible for a plan that misses its deadline, driver.ExitInvalid for what the
// user must change (a spec's problems, a refusal, a full queue, an unknown run, a trainer's
// folder too large to send); 0 for any other error.
func ExitCode(err error) int {
	var tooLarge *codebundle.TooLargeError
	if errors.As(err, &tooLarge) { // the user's to fix: an .rbignore, another workdir
		return driver.ExitInvalid
	}
	ce, ok := err.(*Error)
	switch {
	case !ok:
		return 0
	case ce.Status == 422 && strings.Contains(ce.Message, "deadline"):
		return driver.ExitInfeasible
	case ce.Status == 422 || ce.Status == 403 || ce.Status == 404 || ce.Status == 429 || ce.Status == 409:
		return driver.ExitInvalid
	}
	return 0
}

// FollowToEnd copies the run's driver log to log until it ends (Follow), then prints how it
// ended: its state and why on log, and on out what `rubberband report` prints of it in output
// (table or json), rendered by the server; a run that never started is printed itself with
// json. The exit code says how it ended: 0 finished in time, driver.ExitDeadlineMissed past its
// deadline, driver.ExitPaused paused, driver.ExitError otherwise.
func (c *Client) FollowToEnd(ctx context.Context, id, output string, out, log io.Writer) (int, error) {
	run, err := c.Follow(ctx, id, log)
	if err != nil {
		return 0, err
	}
	end := fmt.Sprintf("%s %s: %s", run.ID, run.Name, run.State)
	if run.Message != "" {
		end += " (" + run.Message + ")"
	}
	fmt.Fprintln(log, end)
	var rep bytes.Buffer
	switch err := c.Copy(ctx, run.ID, "report", url.Values{"output": {output}}, &rep); {
	case err == nil:
		out.Write(rep.Bytes())
	case output == "json": // it never started: the run is all there is
		if err := format.JSON(out, run); err != nil {
			return 0, err
		}
	}
	switch run.State {
	case store.Finished:
		var end runstate.Report // the exit code says whether the deadline held
		if err := c.Get(ctx, run.ID, "report", &end); err != nil {
			return 0, err
		}
		if end.DeadlineMissed {
			return driver.ExitDeadlineMissed, nil
		}
		return 0, nil
	case store.Paused:
		return driver.ExitPaused, nil
	}
	return driver.ExitError, nil
}

// RunOptions are how RunSpec submits a spec and shows it: its priority in its team's queue,
// whether to leave it once queued (Detach) rather than follow it, and the output (table or
// json).
type RunOptions struct {
	Priority int
	Detach   bool
	Output   string
}

// RunSpec submits the spec exp was parsed from (SubmitSpec), shows on log its plan (not with
// json) and where it stands in the queue, then prints it (its ID, or its JSON) when o.Detach,
// else follows it to its end (FollowToEnd, whose exit code it returns).
func (c *Client) RunSpec(ctx context.Context, src *spec.Source, exp *spec.Experiment, o RunOptions, out, log io.Writer) (int, error) {
	run, plan, err := c.SubmitSpec(ctx, src, exp, o.Priority, log)
	if err != nil {
		return 0, err
	}
	if o.Output != "json" && plan != nil {
		plan.WriteTable(log)
	}
	fmt.Fprintln(log, Submitted(run, c.Base))
	switch {
	case !o.Detach:
		return c.FollowToEnd(ctx, run.ID, o.Output, out, log)
	case o.Output == "json":
		return 0, format.JSON(out, run)
	}
	fmt.Fprintln(out, run.ID)
	return 0, nil
}

// ResumeAndFollow queues the paused run id again, says so on log, and follows it to its end
// (FollowToEnd, whose exit code it returns).
func (c *Client) ResumeAndFollow(ctx context.Context, id, output string, out, log io.Writer) (int, error) {
	run, err := c.Resume(ctx, id)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(log, "rubberband: %s: queued to resume\n", run.ID)
	return c.FollowToEnd(ctx, run.ID, output, out, log)
}

// PrintRuns writes the server's runs on w as `rubberband list` does: as JSON, or as a table
// (WriteRuns at now), or says there are none.
func (c *Client) PrintRuns(ctx context.Context, w io.Writer, asJSON bool, now time.Time) error {
	runs, err := c.Runs(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return format.JSON(w, runs)
	}
	if len(runs) == 0 {
		fmt.Fprintf(w, "no runs on %s\n", c.Base)
		return nil
	}
	return WriteRuns(w, runs, now)
}

// RenderStatus is run's status as `rubberband status` draws it here (rundir.RenderStatus, on
// the server), and whether the run is still live there; a run still queued, drawn once as a
// table, is where it stands in the queue (WriteStatus): no driver has opened it.
func (c *Client) RenderStatus(ctx context.Context, run Run, o rundir.StatusOptions) ([]byte, bool, error) {
	var buf bytes.Buffer
	if run.State == store.Queued && !o.JSON && !o.Compact { // Compact: a watch's redraw
		WriteStatus(&buf, run)
		return buf.Bytes(), false, nil
	}
	if err := c.Copy(ctx, run.ID, "status", StatusQuery(o), &buf); err != nil {
		return nil, false, err
	}
	now, err := c.Run(ctx, run.ID)
	return buf.Bytes(), err == nil && !now.State.Settled(), err
}

// Best is run id's best trial, as `rubberband best` finds it here (rundir.Best).
func (c *Client) Best(ctx context.Context, id string) (*rundir.BestTrial, error) {
	var b rundir.BestTrial
	if err := c.Get(ctx, id, "best", &b); err != nil {
		return nil, err
	}
	return &b, nil
}
