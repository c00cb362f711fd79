package planner

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// EncodeReport's bytes are a plan file: ReadReport reads back what was encoded.
func TestEncodeReportReadsBack(t *testing.T) {
	rep, err := ReadReport(strings.NewReader(`{"experiment":"x","brackets":[{"name":"sha","stages":[{"trials":1,"iters":1,"gpus":1,"nodes":1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(bytes.NewReader(data))
	if err != nil || !reflect.DeepEqual(back, rep) || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Fatalf("read back %+v, %v; want %+v", back, err, rep)
	}
}
