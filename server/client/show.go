package client

import (
	"bytes"
	"fmt"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
	"io"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SubmissionOf is a spec as it was read (its text and the files it names) as a submission.
func SubmissionOf(src *spec.Source, priority int) server.Submission {
	sub := server.Submission{Name: src.Path, Spec: string(src.Data), Files: map[string]string{}, Priority: priority}
	for name, b := range src.Files {
		sub.Files[name] = string(b)
	}
	return sub
}

// WriteRuns writes runs as `rubberband list` shows a server's: state, submission, start (or
// predicted start), peak GPUs, predicted and charged cost.
func WriteRuns(w io.Writer, runs []Run, now time.Time) error {
	var buf bytes.Buffer
	tw := format.NewTable(&buf, "RUN ID", "NAME", "TEAM", "USER", "STATE", "SUBMITTED", "START", "GPUS", "PREDICTED", "COST")
	for _, r := range runs {
		start := "-"
		switch {
		case !r.StartedAt.IsZero():
			start = format.Ago(r.StartedAt, now)
		case !r.PredictedStart.IsZero():
			start = "in " + format.Clock(r.PredictedStart.Sub(now).Seconds())
		}
		state := string(r.State)
		if r.Message != "" {
			state += ": " + format.Shorten(r.Message, 40)
		}
		tw.Row(r.ID, r.Name, r.Team, r.User, state, format.Ago(r.SubmittedAt, now), start, r.GPUs, format.Money(r.PredictedCostUSD), format.Money(r.CostUSD))
	}
	tw.Flush()
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteStatus writes one run as `rubberband status` shows a server's.
func WriteStatus(w io.Writer, r Run) {
	fmt.Fprintf(w, "%s %s (team %s, %s): %s\n", r.ID, r.Name, r.Team, r.User, r.State)
	if r.Message != "" {
		fmt.Fprintf(w, "  %s\n", r.Message)
	}
	if !r.PredictedStart.IsZero() {
		fmt.Fprintf(w, "  predicted to start %s\n", r.PredictedStart.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "  plan: %d GPUs on %d nodes at its peak, %s predicted (at its quantile), JCT %s; charged %s so far\n",
		r.GPUs, r.Nodes, format.Money(r.PredictedCostUSD), format.Clock(r.PredictedJCTSeconds), format.Money(r.CostUSD))
}

// Submitted says where a queued run stands: "queued, predicted to start 15:04:05".
func Submitted(r Run, base string) string {
	when := "starts when the team's GPUs allow"
	if !r.PredictedStart.IsZero() {
		when = "predicted to start " + r.PredictedStart.Local().Format("15:04:05")
	}
	return fmt.Sprintf("submitted %s (%s) to %s: queued, %s", r.ID, r.Name, base, when)
}

// CodeSent is the line that says which code a run was sent with, and whether the server had it.
func CodeSent(m *codebundle.Manifest, sent bool) string {
	how := "the server has it already"
	if sent {
		how = "sent"
	}
	return fmt.Sprintf("rubberband: trainer code %s: %d files, %s (%s, %s)", m.Dir, len(m.Files), codebundle.HumanSize(m.Bytes), m.SHA256[:12], how)
}
