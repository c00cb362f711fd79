package checkpoint_test

import (
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/file"
)

// A run's prefix is runs/<run-id>/ in the per-run layout and the root in the shared one; a run
// ID that would leave runs/ or nest under another run's prefix is refused, as is a layout this
// binary does not know (a newer binary's run).
func TestRunPrefix(t *testing.T) {
	for _, c := range []struct {
		layout, runID, want string
		bad                 bool
	}{
		{checkpoint.LayoutPerRun, "r-20261128-0405-1a2b3c4d", "runs/r-20261128-0405-1a2b3c4d/", false},
		{checkpoint.LayoutShared, "r-1", "", false},
		{checkpoint.LayoutPerRun, "", "", true},
		{checkpoint.LayoutPerRun, "..", "", true},
		{checkpoint.LayoutPerRun, "r-1/trials", "", true},
		{checkpoint.LayoutPerRun, "../../etc", "", true},
		{"v9", "r-1", "", true},
	} {
		got, err := checkpoint.RunPrefix(c.layout, c.runID)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("RunPrefix(%q, %q) = %q, %v", c.layout, c.runID, got, err)
		}
	}
}

// Prefixed takes only a prefix that is a key followed by "/", and the empty prefix is the store.
func TestPrefixedValidates(t *testing.T) {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"runs/r-1", "/runs/r-1/", "runs//", "../x/", "runs/../x/"} {
		if _, err := checkpoint.Prefixed(s, p); !errors.Is(err, checkpoint.ErrBadKey) {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
	if same, err := checkpoint.Prefixed(s, ""); err != nil || same != checkpoint.Store(s) {
		t.Errorf("the empty prefix: %v, %v", same, err)
	}
}
