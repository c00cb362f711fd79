package spec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The schema is written as JSON people read: indented, with its < and > as they are.
func TestWriteSchema(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := WriteSchema(&out, BuiltinCatalog()); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["properties"] == nil {
		t.Fatalf("not the schema: %v", err)
	}
	if !strings.HasPrefix(out.String(), "{\n  \"") || strings.Contains(out.String(), `\u003c`) {
		t.Errorf("not written for people: %.80q", out.String())
	}
}
