package sim

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// ParseAlloc reads GPUs per stage, brackets by ';', nodes after '/', an offer after '@'; a bad
// field names its bracket and stage, from 1.
func TestParseAlloc(t *testing.T) {
	exp, err := spec.Load("../examples/paper/table2-types.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAlloc(m, "32, 20/8,12@p3.2xlarge:spot;8")
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(a[0]) != 3 || a[0][0].GPUs != 32 || a[0][1].Nodes != 8 || a[0][2].Type != "p3.2xlarge" || a[0][2].Market != "spot" || a[1][0].GPUs != 8 {
		t.Fatalf("parsed %+v", a)
	}
	for in, want := range map[string]string{
		"32,x":           `bracket 1 stage 2: "x" is not a GPU count`,
		"8;4/0":          `bracket 2 stage 1: "0" is not a node count`,
		"8@p9.huge:spot": `bracket 1 stage 1: "p9.huge:spot" is not an instance type and market the spec offers`,
	} {
		if _, err := ParseAlloc(m, in); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
