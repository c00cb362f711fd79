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

// A snapshot's schema print holds every field of every type in it, down to the types a named
// type holds (a type's name alone would not change when a field is added to it): what a binary
// with other fields wrote is not decoded by this one.
func TestSchemaPrintHoldsEveryField(t *testing.T) {
	var b strings.Builder
	schemaPrint(&b, reflect.TypeFor[savedSnapshot](), map[reflect.Type]bool{})
	for _, want := range []string{"Trials []runstate.savedTrial", "Ladder asha.Saved", "Unpromoted []asha.SavedResult",
		"Loss float64", "PricePerHour float64", "Drawn int", "Pos int", "Mark journal.Mark"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the schema print lacks %q", want)
		}
	}
	if snapMagic() != snapMagic() {
		t.Fatal("the magic line changes from call to call")
	}
}
