package ec2sim

import (
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// launch starts n instances tagged run=value, in one reservation.
func launch(t *testing.T, c clients, n int, run string, spot bool) []string {
	t.Helper()
	in := runInput("")
	in.MinCount, in.MaxCount = aws.Int32(int32(n)), aws.Int32(int32(n))
	in.InstanceType = types.InstanceTypeC5Large
	in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
		Tags: []types.Tag{{Key: aws.String("run"), Value: aws.String(run)}}}}
	if spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	}
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	return ids
}

func describeIDs(t *testing.T, c clients, in *ec2.DescribeInstancesInput) []string {
	t.Helper()
	var ids []string
	p := ec2.NewDescribeInstancesPaginator(c.ec2, in)
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, aws.ToString(i.InstanceId))
			}
		}
	}
	sort.Strings(ids)
	return ids
}

func ec2Filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

func sorted(ids ...[]string) []string {
	var out []string
	for _, l := range ids {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDescribeFiltersAndPages(t *testing.T) {
	s, c := start(t, Config{})
	a := launch(t, c, 3, "a", false)
	b := launch(t, c, 4, "b", true)
	if _, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: b[:1]}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, b[0], StateTerminated)

	for name, tc := range map[string]struct {
		filters []types.Filter
		want    []string
	}{
		"tag":                 {[]types.Filter{ec2Filter("tag:run", "a")}, sorted(a)},
		"tag wildcard":        {[]types.Filter{ec2Filter("tag:run", "?")}, sorted(a, b)},
		"tag-key":             {[]types.Filter{ec2Filter("tag-key", "run")}, sorted(a, b)},
		"spot":                {[]types.Filter{ec2Filter("instance-lifecycle", "spot")}, sorted(b)},
		"not terminated":      {[]types.Filter{ec2Filter("tag:run", "b"), ec2Filter("instance-state-name", "pending", "running", "shutting-down", "stopping", "stopped")}, sorted(b[1:])},
		"terminated, by code": {[]types.Filter{ec2Filter("instance-state-code", "48")}, b[:1]},
		"zone":                {[]types.Filter{ec2Filter("availability-zone", "us-east-1b")}, nil},
		"absent tag":          {[]types.Filter{ec2Filter("tag:nope", "*")}, nil},
	} {
		got := describeIDs(t, c, &ec2.DescribeInstancesInput{Filters: tc.filters})
		if !equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}

	// Pages of 5: every instance once, even when one is launched between two pages.
	first, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	if first.NextToken == nil {
		t.Fatal("no NextToken after 5 of 7 instances")
	}
	late := launch(t, c, 1, "c", false)
	rest := describeIDs(t, c, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5), NextToken: first.NextToken})
	var seen []string
	for _, r := range first.Reservations {
		for _, i := range r.Instances {
			seen = append(seen, aws.ToString(i.InstanceId))
		}
	}
	if all := sorted(seen, rest); !equal(all, sorted(a, b, late)) {
		t.Errorf("pages gave %v, want %v", all, sorted(a, b, late))
	}

	for name, in := range map[string]*ec2.DescribeInstancesInput{
		"InvalidParameterValue":       {Filters: []types.Filter{ec2Filter("colour", "red")}},
		"InvalidParameterCombination": {MaxResults: aws.Int32(5), InstanceIds: a},
		"InvalidPaginationToken":      {NextToken: aws.String("forged")},
		"InvalidInstanceID.NotFound":  {InstanceIds: []string{"i-0123456789abcdef0"}},
		"InvalidInstanceID.Malformed": {InstanceIds: []string{"i-xyz"}},
	} {
		if _, err := c.ec2.DescribeInstances(t.Context(), in); apiCode(err) != name {
			t.Errorf("want %s, got %v", name, err)
		}
	}
}

func TestCreateTags(t *testing.T) {
	s, c := start(t, Config{})
	ids := launch(t, c, 1, "a", false)
	vol := s.Instances()[0].VolumeID
	_, err := c.ec2.CreateTags(t.Context(), &ec2.CreateTagsInput{Resources: []string{ids[0], vol},
		Tags: []types.Tag{{Key: aws.String("rubberband:node"), Value: aws.String("n7")}}})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Instances()[0]
	if got.Tags["rubberband:node"] != "n7" || got.VolumeTags["rubberband:node"] != "n7" || got.Tags["run"] != "a" {
		t.Errorf("tags %v, volume tags %v", got.Tags, got.VolumeTags)
	}
	if _, err := c.ec2.CreateTags(t.Context(), &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"},
		Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("tagging an unknown instance: %v", err)
	}
}
