package driver

import (
	"context"
	"testing"
)

// The dashboard's cancel of a finished run leaves it finished; cancel says what it found.
func TestCancelDirAndSaid(t *testing.T) {
	s, log := startOf(t, Virtual)
	st, _, err := StartRun(context.Background(), s)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, log)
	}
	if err := CancelDir(context.Background(), st.Dir); err != nil {
		t.Fatalf("cancel of a finished run: %v", err)
	}
	if what, err := Cancel(context.Background(), st, CancelWait, nil); err != nil || what != HadFinished {
		t.Errorf("after the dashboard's cancel: %v, %v", what, err)
	}
	if got := HadFinished.Said("runs/a"); got != "runs/a had finished: nothing to cancel" {
		t.Errorf("finished: %q", got)
	}
	if got := WasCancelled.Said("runs/a"); got != "runs/a is cancelled" {
		t.Errorf("cancelled: %q", got)
	}
}
