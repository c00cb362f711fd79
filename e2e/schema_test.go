package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// TestSchemaCommand: `rubberband schema` prints a draft 2020-12 JSON Schema naming every
// top-level field of a spec.
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	out, errOut, code := rb(t, "schema")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s struct {
		Schema     string                     `json:"$schema"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema is %q", s.Schema)
	}
	typ := reflect.TypeFor[spec.Experiment]()
	for i := range typ.NumField() {
		name := strings.Split(typ.Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || !typ.Field(i).IsExported() {
			continue
		}
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("the schema lacks the top-level field %s", name)
		}
	}
	if len(s.Properties) == 0 {
		t.Fatal("no properties")
	}
}
