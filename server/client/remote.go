package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/server/store"
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
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(run); err != nil {
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
