package spec

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// A spec without a profile is refused where a profile is needed with a NoProfileError that
// says what to run (on main: "SPEC:0: profile.iter_latency: is required"), and accepted with
// ProfileOptional, which `profile`, `init` and `validate` parse with. A profile that is given
// but incomplete, and every other problem, keep their field and line.
func TestMissingProfile(t *testing.T) {
	const noProfile = "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"trainer: {command: [python3, train.py]}\ncluster: {instance_type: g4dn.xlarge}\n"
	exp, err := Parse("rubberband.yaml", []byte(noProfile), nil)
	var np *NoProfileError
	if !errors.As(err, &np) || np.File != "rubberband.yaml" || !exp.MissingProfile() {
		t.Fatalf("want a NoProfileError, got %T %v", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "rubberband profile rubberband.yaml") || strings.Contains(msg, ":0:") {
		t.Errorf("the error does not say what to run: %q", msg)
	}
	exp, err = Parse("rubberband.yaml", []byte(noProfile), nil, ProfileOptional())
	if err != nil || !exp.MissingProfile() || exp.Cluster.GPUsPerNode != 1 {
		t.Fatalf("ProfileOptional: %v (%+v)", err, exp.Cluster)
	}
	// Given but incomplete: a problem at the profile's field and line, with or without the option.
	for _, opts := range [][]Option{nil, {ProfileOptional()}} {
		_, err = Parse("a.yaml", []byte(noProfile+"profile:\n  startup_latency: {value: 1s}\n"), nil, opts...)
		probs := problems(t, err)
		if len(probs) != 1 || probs[0].Path != "profile.iter_latency" || probs[0].Line != 6 {
			t.Errorf("incomplete profile: %v", probs)
		}
	}
	// Other problems keep their field and line; the missing profile is not one of them.
	_, err = Parse("a.yaml", []byte(strings.Replace(noProfile, "trials: 4", "trials: 0", 1)), nil)
	probs := problems(t, err)
	if len(probs) != 1 || probs[0].Path != "algorithm.sha.trials" || probs[0].Line != 3 {
		t.Errorf("other problems: %v", probs)
	}
	// Candidate types without the spec's profile each need their own, as before.
	_, err = Parse("a.yaml", []byte(strings.Replace(noProfile, "{instance_type: g4dn.xlarge}", "{instance_types: [{instance_type: g4dn.xlarge}]}", 1)), nil, ProfileOptional())
	if probs := problems(t, err); len(probs) != 1 || probs[0].Path != "cluster.instance_types[0].profile" || probs[0].Line != 5 {
		t.Errorf("a candidate without a profile: %v", probs)
	}
}

// The JSON Schema a YAML language server checks as one types does not require a profile either:
// `rubberband init` writes a spec without one (on main it was required, a red squiggle on the
// first line of every new spec).
func TestSchemaAcceptsSpecWithoutProfile(t *testing.T) {
	const noProfile = "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"trainer: {command: [python3, train.py]}\ncluster: {instance_type: g4dn.xlarge}\n"
	if err := compileSchema(t, Schema()).Validate(yamlToJSON(t, []byte(noProfile))); err != nil {
		t.Error(err)
	}
}

// A spec that names a profile file not written yet is what `rubberband profile` writes into: with
// ProfileOptional it parses and names the file (on main: "cannot read profile: ... no such file",
// so a user who wrote profile: {file: F} first could never measure F); without, the one problem
// says to measure it, at the field's line.
func TestProfileFileNotYetMeasured(t *testing.T) {
	const named = "name: x\nobjective: {metric: m}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"trainer: {command: [python3, train.py]}\ncluster: {gpus_per_node: 2, price_per_hour: 1}\nprofile: {file: measured.yaml}\n"
	read := func(string) ([]byte, error) {
		return nil, &fs.PathError{Op: "open", Path: "measured.yaml", Err: fs.ErrNotExist}
	}
	exp, err := Parse("job.yaml", []byte(named), read, ProfileOptional())
	if err != nil || exp.ProfileFile() != "measured.yaml" {
		t.Fatalf("ProfileOptional: %v, profile file %q", err, exp.ProfileFile())
	}
	_, err = Parse("job.yaml", []byte(named), read)
	probs := problems(t, err)
	if len(probs) != 1 || probs[0].Path != "profile.file" || probs[0].Line != 6 || !strings.Contains(probs[0].Msg, "rubberband profile job.yaml") {
		t.Fatalf("needed: %v", probs)
	}
	// Another error reading it stays one, either way.
	denied := func(string) ([]byte, error) { return nil, fs.ErrPermission }
	if _, err := Parse("job.yaml", []byte(named), denied, ProfileOptional()); err == nil {
		t.Fatal("an unreadable profile file was accepted")
	}
}
