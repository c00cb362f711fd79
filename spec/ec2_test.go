package spec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// ec2Cluster is a cluster line with an ec2 block of the given fields after a valid ami and subnet.
func ec2Cluster(fields string) string {
	return "cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d]" + fields + "}}"
}

// The ec2 block decodes whole, with a line for every field; without it Cluster.EC2 is nil.
func TestEC2Block(t *testing.T) {
	src := withField(`cluster:
  instance_type: p3.2xlarge
  ec2:
    region: eu-west-1
    ami: ami-0123456789abcdef0
    subnets: [subnet-0a1b2c3d4e5f60718, subnet-1a2b3c4d]
    security_groups: [sg-0123456789abcdef0]
    instance_profile: arn:aws:iam::123456789012:instance-profile/team/rubberband-worker
    key_name: ops key
    tags: {team: ml, cost-center: 1234}
    user_data: |
      echo hello >> /var/log/extra.log`)
	exp, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &EC2{Region: "eu-west-1", AMI: "ami-0123456789abcdef0", Subnets: []string{"subnet-0a1b2c3d4e5f60718", "subnet-1a2b3c4d"},
		SecurityGroups: []string{"sg-0123456789abcdef0"}, InstanceProfile: "arn:aws:iam::123456789012:instance-profile/team/rubberband-worker",
		KeyName: "ops key", Tags: map[string]string{"team": "ml", "cost-center": "1234"}, UserData: "echo hello >> /var/log/extra.log\n",
		Watchdog: DefaultWatchdog}
	if !reflect.DeepEqual(exp.Cluster.EC2, want) {
		t.Fatalf("decoded %+v", exp.Cluster.EC2)
	}
	if exp.Line("cluster.ec2.subnets[1]") != 9 || exp.Line("cluster.ec2.tags.team") != 13 {
		t.Errorf("lines: subnets[1] %d, tags.team %d", exp.Line("cluster.ec2.subnets[1]"), exp.Line("cluster.ec2.tags.team"))
	}
	if exp, err := Parse("a.yaml", []byte(validBase), nil); err != nil || exp.Cluster.EC2 != nil || exp.Cluster.Nomad != nil {
		t.Fatalf("without the blocks: %+v, %v", exp.Cluster, err)
	}
}

// Every ec2 value takes its bound and refuses what lies beyond it, as exactly one problem at its
// path; the block needs an instance type.
func TestEC2Values(t *testing.T) {
	tags := func(n int) string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf("k%d: v", i))
		}
		return ", tags: {" + strings.Join(kv, ", ") + "}"
	}
	subnets := func(n int) string {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("subnet-%08x", i))
		}
		return "[" + strings.Join(ids, ", ") + "]"
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct{ line, path, msg string }{
		{ec2Cluster(""), "", ""},
		{ec2Cluster(", region: us-east-1"), "", ""},
		{ec2Cluster(", region: us-gov-west-1"), "", ""},
		{ec2Cluster(", region: ap-southeast-2"), "", ""},
		{ec2Cluster(", region: US-EAST-1"), "cluster.ec2.region", "not an AWS region"},
		{ec2Cluster(", region: us-east"), "cluster.ec2.region", "not an AWS region"},
		{ec2Cluster(", region: useast1"), "cluster.ec2.region", "not an AWS region"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {subnets: [subnet-0a1b2c3d]}}", "cluster.ec2.ami", "is required"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-123, subnets: [subnet-0a1b2c3d]}}", "cluster.ec2.ami", "not an AMI id"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789ABCDEF0, subnets: [subnet-0a1b2c3d]}}", "cluster.ec2.ami", "not an AMI id"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef01, subnets: [subnet-0a1b2c3d]}}", "cluster.ec2.ami", "not an AMI id"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0}}", "cluster.ec2.subnets", "at least one subnet"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: []}}", "cluster.ec2.subnets", "at least one subnet"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: subnet-0a1b2c3d}}", "cluster.ec2.subnets", "expected a list"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d, subnet-xyz]}}", "cluster.ec2.subnets[1]", "not a subnet id"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d, subnet-0a1b2c3d]}}", "cluster.ec2.subnets[1]", "given twice (also at [0])"},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: " + subnets(MaxSubnets) + "}}", "", ""},
		{"cluster: {instance_type: p3.2xlarge, ec2: {ami: ami-0123456789abcdef0, subnets: " + subnets(MaxSubnets+1) + "}}", "cluster.ec2.subnets", "at most 32"},
		{ec2Cluster(", security_groups: [sg-0123456789abcdef0, sg-12345678]"), "", ""},
		{ec2Cluster(", security_groups: [sg-1]"), "cluster.ec2.security_groups[0]", "not a security group id"},
		{ec2Cluster(", security_groups: [sg-12345678, sg-12345678]"), "cluster.ec2.security_groups[1]", "given twice"},
		{ec2Cluster(", instance_profile: rubberband-worker"), "", ""},
		{ec2Cluster(", instance_profile: arn:aws:iam::123456789012:instance-profile/rb"), "", ""},
		{ec2Cluster(", instance_profile: arn:aws-cn:iam::123456789012:instance-profile/rb"), "", ""},
		{ec2Cluster(", instance_profile: 'my profile'"), "cluster.ec2.instance_profile", "not an instance profile"},
		{ec2Cluster(", instance_profile: arn:aws:iam::123:instance-profile/rb"), "cluster.ec2.instance_profile", "not an instance profile"},
		{ec2Cluster(", instance_profile: arn:aws:iam::123456789012:role/rb"), "cluster.ec2.instance_profile", "not an instance profile"},
		{ec2Cluster(", key_name: " + long(MaxKeyNameLen)), "", ""},
		{ec2Cluster(", key_name: " + long(MaxKeyNameLen+1)), "cluster.ec2.key_name", "not a key pair name"},
		{ec2Cluster(`, key_name: "a\tb"`), "cluster.ec2.key_name", "not a key pair name"},
		{ec2Cluster(tags(MaxEC2Tags)), "", ""},
		{ec2Cluster(tags(MaxEC2Tags + 1)), "cluster.ec2.tags", "at most 40"},
		{ec2Cluster(", tags: {aws:cloudformation: x}"), "cluster.ec2.tags.aws:cloudformation", "reserved: keys starting with aws:"},
		{ec2Cluster(", tags: {AWS:x: x}"), "cluster.ec2.tags.AWS:x", "reserved: keys starting with aws:"},
		{ec2Cluster(", tags: {rubberband:run: x}"), "cluster.ec2.tags.rubberband:run", "reserved: keys starting with rubberband:"},
		{ec2Cluster(", tags: {Name: x}"), "cluster.ec2.tags.Name", "rubberband names each instance"},
		{ec2Cluster(", tags: {name: x, awsome: y, rubberband-team: z}"), "", ""},
		{ec2Cluster(", tags: {" + long(MaxTagKeyLen) + ": " + long(MaxTagValueLen) + "}"), "", ""},
		{ec2Cluster(", tags: {" + long(MaxTagKeyLen+1) + ": x}"), "cluster.ec2.tags." + long(MaxTagKeyLen+1), "the key is 129 characters"},
		{ec2Cluster(", tags: {k: " + long(MaxTagValueLen+1) + "}"), "cluster.ec2.tags.k", "the value is 257 characters"},
		{ec2Cluster(", tags: {k: [v]}"), "cluster.ec2.tags.k", "expected a string"},
		{ec2Cluster(", watchdog: 30s"), "", ""},
		{ec2Cluster(", watchdog: 24h"), "", ""},
		{ec2Cluster(", watchdog: 29s"), "cluster.ec2.watchdog", "29s is out of range (30s to 24h0m0s)"},
		{ec2Cluster(", watchdog: 25h"), "cluster.ec2.watchdog", "out of range"},
		{ec2Cluster(", watchdog: soon"), "cluster.ec2.watchdog", "duration"},
		{ec2Cluster(", user_data: " + long(MaxUserDataBytes)), "", ""},
		{ec2Cluster(", user_data: " + long(MaxUserDataBytes+1)), "cluster.ec2.user_data", "8193 bytes (at most 8192"},
		{"cluster: {gpus_per_node: 1, price_per_hour: 1, ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d]}}", "cluster.instance_type", "the ec2 block needs an instance type"},
		{"cluster: {instance_type: [p3.2xlarge], ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d]}}", "cluster.instance_type", "expected a string"},
		{"cluster: {instance_type: p3.2xlarge, ec2: [ami-0123456789abcdef0]}", "cluster.ec2", "expected a mapping"},
		{ec2Cluster(", instance_type: p3.2xlarge"), "cluster.ec2.instance_type", "unknown field"},
	} {
		_, err := Parse("a.yaml", []byte(withField(tc.line)), nil)
		probs := problems(t, err)
		name := tc.line
		if len(name) > 120 {
			name = name[:120] + "..."
		}
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: refused:\n%.500v", name, err)
		case tc.path != "" && (len(probs) != 1 || probs[0].Path != tc.path || probs[0].Line != 4 || !strings.Contains(probs[0].Msg, tc.msg)):
			t.Errorf("%s: want one problem at line 4, %.140s: ...%s..., got\n%.500v", name, tc.path, tc.msg, err)
		}
	}
}

// Credentials are never spec fields: written under ec2 they are unknown fields like any other,
// and the problem does not repeat the secret.
func TestEC2RefusesCredentials(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, field := range []string{"secret_access_key", "access_key_id", "aws_secret_access_key", "session_token"} {
		src := withField("cluster:\n  instance_type: p3.2xlarge\n  ec2:\n    ami: ami-0123456789abcdef0\n    subnets: [subnet-0a1b2c3d]\n    " + field + ": " + secret)
		_, err := Parse("a.yaml", []byte(src), nil)
		probs := problems(t, err)
		if len(probs) != 1 || probs[0].Path != "cluster.ec2."+field || probs[0].Line != 9 || !strings.Contains(probs[0].Msg, "unknown field") {
			t.Errorf("%s: want one unknown-field problem at line 9, got\n%v", field, err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("%s: the problem echoes the secret: %v", field, err)
		}
	}
}

// Problems in the new blocks carry the file and the line of the field, as every other does.
func TestClusterBlockLines(t *testing.T) {
	src := withField(`cluster:
  instance_type: p3.2xlarge
  market: spot
  spot:
    discount: 1.5
    notice: 2h
  ec2:
    ami: ami-0123456789abcdef0
    subnets:
      - subnet-0a1b2c3d
      - subnet-nope
    tags: {aws:x: y}
  nomad:
    node_pool: "a b"`)
	_, err := Parse("team.yaml", []byte(src), nil)
	want := []string{
		"team.yaml:8: cluster.spot.discount: 1.5 is out of range",
		"team.yaml:9: cluster.spot.notice: 2h0m0s is out of range (0 to 1h0m0s)",
		"team.yaml:14: cluster.ec2.subnets[1]: \"subnet-nope\" is not a subnet id",
		"team.yaml:15: cluster.ec2.tags.aws:x: reserved",
		"team.yaml:17: cluster.nomad.node_pool: \"a b\" is not a Nomad name",
	}
	probs := problems(t, err)
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(probs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(probs[i].String(), w) {
			t.Errorf("problem %d is %q, want %s...", i, probs[i], w)
		}
	}
}
