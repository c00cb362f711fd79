package runstate

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every field the fold keeps has its field in the snapshot (by name, case aside): a field added
// to State, a trial or ASHA's state without one would be lost by a resume from a snapshot.
func TestSnapshotSavesEveryField(t *testing.T) {
	for _, c := range []struct {
		state, saved any
		made         []string // what New makes of the plan again
	}{
		{State{}, savedState{}, []string{"origin", "exp", "Brackets", "Model", "timeScale", "log"}},
		{trialRun{}, savedTrial{}, nil},
		{ashaState{}, savedASHA{}, nil},
		{observed{}, savedEvidence{}, nil},
	} {
		saved := map[string]bool{}
		st := reflect.TypeOf(c.saved)
		for i := range st.NumField() {
			saved[strings.ToLower(st.Field(i).Name)] = true
		}
		ty := reflect.TypeOf(c.state)
		for i := range ty.NumField() {
			name := ty.Field(i).Name
			if !saved[strings.ToLower(name)] && !slices.Contains(c.made, name) {
				t.Errorf("%s.%s has no field in %s", ty.Name(), name, st.Name())
			}
		}
	}
}
