package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
)

// cleanup acts only on a backend whose machines outlive a run, for one experiment or all.
func TestCheckCleanup(t *testing.T) {
	t.Parallel()
	one := ec2.Filter{Experiment: "mnist"}
	for _, tc := range []struct {
		backend string
		f       ec2.Filter
		want    string
	}{
		{"", one, "cleanup needs --backend ec2"},
		{"gce", one, `--backend "gce" is not a backend cleanup knows`},
		{"local", one, "cleanup is for --backend ec2: local runs release"},
		{"ec2", ec2.Filter{}, "cleanup needs exactly one of"},
		{"ec2", ec2.Filter{Experiment: "mnist", All: true}, "cleanup needs exactly one of"},
	} {
		err := CheckCleanup(tc.backend, tc.f)
		if !errors.Is(err, ErrInput) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q %+v: %v, want ErrInput %q", tc.backend, tc.f, err, tc.want)
		}
	}
	if err := CheckCleanup("ec2", ec2.Filter{All: true}); err != nil {
		t.Errorf("ec2 --all: %v", err)
	}
	if got := CleanupWhat(one) + "; " + CleanupWhat(ec2.Filter{All: true}); got != "experiment mnist; every experiment" {
		t.Errorf("CleanupWhat: %q", got)
	}
	if got := CleanupCount(make([]ec2.Instance, 2), nil) + "; " + CleanupCount(make([]ec2.Instance, 1), make([]ec2.Group, 3)); got != "2 instances; 1 instance and 3 security groups" {
		t.Errorf("CleanupCount: %q", got)
	}
}

// What cleanup would do is said with its region, and a table only for what there is.
func TestWriteFound(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	WriteFound(&out, "us-east-1", nil, nil)
	if out.String() != "would terminate and delete, in us-east-1:\n" {
		t.Errorf("nothing found: %q", out.String())
	}
	out.Reset()
	WriteFound(&out, "us-east-1", []ec2.Instance{{ID: "i-0abc"}}, nil)
	if !strings.Contains(out.String(), "i-0abc") || !strings.Contains(out.String(), "STATE") {
		t.Errorf("an instance found: %q", out.String())
	}
}
