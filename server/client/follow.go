package client

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SubmitSpec submits the spec exp was parsed from (src) at priority, with its trainer's folder
// first (SendCode, a line on log saying so) when the spec ships its code: the server has none
// of this machine's files.
func (c *Client) SubmitSpec(ctx context.Context, src *spec.Source, exp *spec.Experiment, priority int, log io.Writer) (Run, *planner.Report, error) {
	sub := SubmissionOf(src, priority)
	if exp.ShipsCode() {
		code, sent, err := c.SendCode(ctx, exp.Trainer.Workdir)
		if err != nil {
			return Run{}, nil, err
		}
		fmt.Fprintln(log, CodeSent(code, sent))
		sub.Code = code.SHA256
	}
	return c.Submit(ctx, sub)
}

// Follow copies the run's driver log to w until the run ends, and returns the run as it ended.
func (c *Client) Follow(ctx context.Context, id string, w io.Writer) (Run, error) {
	if err := c.Logs(ctx, id, "", -1, true, w); err != nil {
		return Run{}, err
	}
	return c.Wait(ctx, id)
}

// StatusQuery asks the server's status endpoint for what o asks of rundir.RenderStatus.
func StatusQuery(o rundir.StatusOptions) url.Values {
	q := url.Values{}
	if o.JSON {
		q.Set("output", "json")
	}
	if o.Compact {
		q.Set("watch", "1")
	}
	if o.Trials {
		q.Set("trials", "1")
	}
	return q
}
