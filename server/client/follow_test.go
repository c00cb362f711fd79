package client

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir"
)

// The status endpoint is asked for what status's flags ask here, and for nothing else.
func TestStatusQuery(t *testing.T) {
	for _, tc := range []struct {
		o    rundir.StatusOptions
		want string
	}{
		{rundir.StatusOptions{}, ""},
		{rundir.StatusOptions{JSON: true}, "output=json"},
		{rundir.StatusOptions{Compact: true, Trials: true}, "trials=1&watch=1"},
	} {
		if got := StatusQuery(tc.o).Encode(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}
