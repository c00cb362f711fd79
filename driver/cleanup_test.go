package driver

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
)

// What was confirmed is what is ended: the filter names the instances and groups shown, and
// none when none were.
func TestConfirmed(t *testing.T) {
	f := Confirmed(ec2.Filter{Experiment: "e"}, []ec2.Instance{{ID: "i-1"}, {ID: "i-2"}}, []ec2.Group{{ID: "sg-1"}})
	if want := (ec2.Filter{Experiment: "e", IDs: []string{"i-1", "i-2"}, Groups: []string{"sg-1"}}); !reflect.DeepEqual(f, want) {
		t.Errorf("%+v, want %+v", f, want)
	}
	if f := Confirmed(ec2.Filter{All: true}, nil, nil); f.IDs == nil || f.Groups == nil || len(f.IDs)+len(f.Groups) != 0 {
		t.Errorf("nothing confirmed: %+v, want empty lists (nil would pick everything)", f)
	}
}

// WriteCleanup says there was nothing to terminate, or tables what was ended with a line each.
func TestWriteCleanup(t *testing.T) {
	var none bytes.Buffer
	WriteCleanup(&none, CleanupResult{Region: "us-east-1"}, "experiment e")
	if want := "no rubberband instances of experiment e in us-east-1: nothing to terminate\n"; none.String() != want {
		t.Errorf("%q, want %q", none.String(), want)
	}
	var some bytes.Buffer
	WriteCleanup(&some, CleanupResult{Region: "us-east-1", Terminated: []ec2.Instance{{ID: "i-1", State: "running"}}, Groups: []ec2.Group{{ID: "sg-1"}}}, "every experiment")
	for _, want := range []string{"INSTANCE", "i-1", "terminated 1 instance of every experiment in us-east-1", "SECURITY GROUP", "sg-1", "deleted 1 security group of every experiment in us-east-1"} {
		if !strings.Contains(some.String(), want) {
			t.Errorf("no %q in:\n%s", want, some.String())
		}
	}
}

// Prices are a table, then a note for each that is the catalog's, saying why.
func TestWritePrices(t *testing.T) {
	var out bytes.Buffer
	WritePrices(&out, "us-east-1", []ec2.Price{
		{InstanceType: "p3.2xlarge", Market: "on-demand", PerHour: 3.06, Source: "aws"},
		{InstanceType: "p3.2xlarge", Market: "spot", Zone: "us-east-1a", PerHour: 0.9, Source: "catalog (offline)", Note: "no credentials"},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || lines[0] != "region us-east-1" || !strings.Contains(lines[2], " - ") || !strings.Contains(lines[2], "3.0600") ||
		lines[4] != "note: p3.2xlarge spot from the catalog: no credentials" {
		t.Errorf("prices:\n%s", out.String())
	}
}
