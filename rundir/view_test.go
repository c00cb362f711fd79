package rundir

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// A run cancelled before any driver started it (a server's run cancelled as its driver came up:
// the cancel is journaled, no start) is cancelled, not "not started": on main a server took
// that for a driver that died before starting the run, restarted it three times and failed it.
func TestStatusOfARunCancelledBeforeItStarted(t *testing.T) {
	for _, c := range []struct {
		events    []journal.Event
		word, why string
	}{
		{nil, "not started", ""},
		{[]journal.Event{{Ev: journal.EvCancel, Error: "cancelled by `rubberband cancel`"}}, "cancelled", "before it started"},
	} {
		v := &View{Events: c.events}
		for _, e := range c.events {
			v.seen.note(e)
		}
		if word, why := v.Status(); word != c.word || why != c.why {
			t.Errorf("%v: %q, %q; want %q, %q", c.events, word, why, c.word, c.why)
		}
	}
}
