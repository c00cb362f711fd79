package runstate

import (
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// A stop's words are its cause, ": ", then the detail: the snapshot gives the detail apart, so
// that no reader cuts the words itself; a stop whose words do not start with its cause keeps
// them whole.
func TestSnapshotSaysAStopsDetailApart(t *testing.T) {
	src := "name: t\nobjective: {metric: acc}\nalgorithm: {stages: [{trials: 2, iters: 1}]}\n" +
		"cluster: {gpus_per_node: 2, price_per_hour: 1}\nprofile: {iter_latency: {1: {value: 1}}, startup_latency: {value: 1s}}\n"
	exp, _ := modelOf(t, src)
	t0 := time.Unix(1000, 0)
	cases := []struct {
		stop   journal.Event
		cause  journal.StopCause
		detail string
	}{
		{journal.Event{Ev: journal.EvStop, Error: "paused: disk full at /ckpt", Cause: string(journal.StopPaused)}, journal.StopPaused, "disk full at /ckpt"},
		{journal.Event{Ev: journal.EvStop, Error: "budget: the forecast final cost $3 is over", Cause: string(journal.StopBudget)}, journal.StopBudget, "the forecast final cost $3 is over"},
		{journal.Event{Ev: journal.EvStop, Error: "exit status 1", Cause: string(journal.StopFailed)}, journal.StopFailed, "exit status 1"},
	}
	for _, c := range cases {
		snap, err := Fold(Plan{Experiment: exp}, []journal.Event{{Ev: journal.EvStart, At: t0}, c.stop})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Phase != PhaseStopped || snap.Cause != c.cause || snap.Why != c.stop.Error || snap.Detail != c.detail {
			t.Errorf("%q: phase %s, cause %s, why %q, detail %q; want stopped, %s, the words whole, detail %q", c.stop.Error, snap.Phase, snap.Cause, snap.Why, snap.Detail, c.cause, c.detail)
		}
	}
}
