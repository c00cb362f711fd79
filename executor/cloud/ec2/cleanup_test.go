package ec2_test

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// launch rents one instance through the SDK with tags (key, value, ...) and user-data, and
// waits until it is in state.
func launch(t *testing.T, s *ec2sim.Server, market cloud.Market, script, state string, tags ...string) string {
	t.Helper()
	in := &ec2.RunInstancesInput{ImageId: aws.String(testAMI), InstanceType: types.InstanceType(testType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(subnetA)}
	if len(tags) > 0 {
		ts := types.TagSpecification{ResourceType: types.ResourceTypeInstance}
		for i := 0; i+1 < len(tags); i += 2 {
			ts.Tags = append(ts.Tags, types.Tag{Key: aws.String(tags[i]), Value: aws.String(tags[i+1])})
		}
		in.TagSpecifications = []types.TagSpecification{ts}
	}
	if script != "" {
		in.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(script)))
	}
	if market == cloud.Spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	}
	out, err := ec2.NewFromConfig(awsConfig(t)).RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	if _, err := s.WaitState(t.Context(), id, state); err != nil {
		t.Fatal(err)
	}
	return id
}

// fleet is what the cleanup tests start from: experiment "exp" has two runs (three instances,
// one spot, one stopped by its own shutdown), "other" one instance; one instance carries no
// tag, one only rubberband's experiment tag (not rented by rubberband), one belongs to an
// experiment whose name a wildcard "exp*" would match.
type fleet struct {
	exp      []string // exp's, in launch order
	other    string
	expStar  string
	untagged string
	noRun    string
}

func startFleet(t *testing.T, s *ec2sim.Server) fleet {
	t.Helper()
	tags := func(exp, run string) []string {
		return []string{rbec2.TagExperiment, exp, rbec2.TagRun, run, rbec2.TagNode, run + "-n1"}
	}
	var f fleet
	f.exp = append(f.exp,
		launch(t, s, cloud.OnDemand, "", ec2sim.StateRunning, tags("exp", "r1")...),
		launch(t, s, cloud.Spot, "", ec2sim.StateRunning, tags("exp", "r1")...),
		// No shutdown behaviour given: EC2's default, stop, when its user-data ends.
		launch(t, s, cloud.OnDemand, "#!/bin/sh\nexit 0\n", ec2sim.StateStopped, tags("exp", "r2")...))
	f.other = launch(t, s, cloud.OnDemand, "", ec2sim.StateRunning, tags("other", "r3")...)
	f.expStar = launch(t, s, cloud.OnDemand, "", ec2sim.StateRunning, tags("expert", "r4")...)
	f.untagged = launch(t, s, cloud.OnDemand, "", ec2sim.StateRunning)
	f.noRun = launch(t, s, cloud.OnDemand, "", ec2sim.StateRunning, rbec2.TagExperiment, "exp", "team", "ml")
	return f
}

func ids(insts []rbec2.Instance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.ID
	}
	return out
}

// live are the IDs of the fake's instances that are not shutting down or terminated.
func live(s *ec2sim.Server) []string {
	var out []string
	for _, in := range s.Instances() {
		if in.State != ec2sim.StateShuttingDown && in.State != ec2sim.StateTerminated {
			out = append(out, in.ID)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// An experiment's cleanup terminates exactly its instances, stopped ones included, and says
// what each was; a dry run first only lists them. Every other instance survives: another
// experiment's, an untagged one, one carrying only the experiment tag.
func TestCleanupExperiment(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	f := startFleet(t, s)
	all := live(s)
	found, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{Experiment: "exp"}, true)
	if err != nil || !slices.Equal(ids(found), f.exp) {
		t.Fatalf("dry run: %v, %v; want %v", ids(found), err, f.exp)
	}
	if got := live(s); !slices.Equal(got, all) {
		t.Fatalf("a dry run terminated %v", got)
	}
	done, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{Experiment: "exp"}, false)
	if err != nil || !slices.Equal(ids(done), f.exp) {
		t.Fatalf("cleanup: %v, %v; want %v", ids(done), err, f.exp)
	}
	want := []rbec2.Instance{
		{ID: f.exp[0], Type: testType, Zone: "us-east-1a", Market: cloud.OnDemand, Experiment: "exp", Run: "r1", Node: "r1-n1", State: "running"},
		{ID: f.exp[1], Type: testType, Zone: "us-east-1a", Market: cloud.Spot, Experiment: "exp", Run: "r1", Node: "r1-n1", State: "running"},
		{ID: f.exp[2], Type: testType, Zone: "us-east-1a", Market: cloud.OnDemand, Experiment: "exp", Run: "r2", Node: "r2-n1", State: "stopped"},
	}
	for i, in := range done {
		if in.LaunchTime.IsZero() {
			t.Errorf("%s: no launch time", in.ID)
		}
		in.LaunchTime = want[i].LaunchTime
		if in != want[i] {
			t.Errorf("terminated %+v, want %+v", in, want[i])
		}
	}
	if got := live(s); !slices.Equal(got, sorted(f.other, f.expStar, f.untagged, f.noRun)) {
		t.Fatalf("left alive %v", got)
	}
	if again, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{Experiment: "exp"}, false); err != nil || len(again) != 0 {
		t.Fatalf("second cleanup: %v, %v", again, err)
	}
	// Tag filters take wildcards: a name with one must not match other experiments.
	if star, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{Experiment: "exp*"}, false); err != nil || len(star) != 0 {
		t.Fatalf("cleanup of exp*: %v, %v", ids(star), err)
	}
	if got := live(s); !slices.Equal(got, sorted(f.other, f.expStar, f.untagged, f.noRun)) {
		t.Fatalf("left alive %v", got)
	}
}

// --all terminates every instance rubberband rented, of every experiment, and nothing else;
// a throttled call on the way is retried.
func TestCleanupAll(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	f := startFleet(t, s)
	s.Throttle(1)
	done, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{All: true}, false)
	want := append(slices.Clone(f.exp), f.expStar, f.other) // by experiment, run, launch
	if err != nil || !slices.Equal(ids(done), want) {
		t.Fatalf("cleanup --all: %v, %v; want %v", ids(done), err, want)
	}
	if got := live(s); !slices.Equal(got, sorted(f.untagged, f.noRun)) {
		t.Fatalf("left alive %v", got)
	}
	throttled := 0
	for _, c := range s.Calls() {
		if c.Error == "RequestLimitExceeded" {
			throttled++
		}
	}
	if throttled != 1 {
		t.Fatalf("%d throttled calls", throttled)
	}
}

// With IDs (what a person confirmed), only those of them the filter picks are terminated: an
// instance rented after the dry run is not, nor one of another experiment among the IDs.
func TestCleanupConfirmedIDs(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	f := startFleet(t, s)
	done, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{Experiment: "exp", IDs: []string{f.exp[1], f.other, f.untagged}}, false)
	if err != nil || !slices.Equal(ids(done), []string{f.exp[1]}) {
		t.Fatalf("cleanup: %v, %v", ids(done), err)
	}
	if got := live(s); !slices.Equal(got, sorted(f.exp[0], f.exp[2], f.other, f.expStar, f.untagged, f.noRun)) {
		t.Fatalf("left alive %v", got)
	}
	if done, err := rbec2.Cleanup(t.Context(), awsConfig(t), rbec2.Filter{All: true, IDs: []string{}}, false); err != nil || len(done) != 0 {
		t.Fatalf("no IDs confirmed: %v, %v", ids(done), err)
	}
}

// A filter must name an experiment or all, not both or neither.
func TestCleanupFilter(t *testing.T) {
	startSim(t, ec2sim.Config{})
	for _, f := range []rbec2.Filter{{}, {Experiment: "exp", All: true}} {
		if _, err := rbec2.Cleanup(t.Context(), awsConfig(t), f, true); err == nil {
			t.Errorf("%+v: no error", f)
		}
	}
}
