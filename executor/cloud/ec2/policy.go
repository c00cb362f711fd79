package ec2

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Whose policy Policy writes.
const (
	// ForDriver is the driver's: what run, resume, cancel, cleanup, profile, prices and catalog
	// refresh call.
	ForDriver = "driver"
	// ForInstance is the instance profile's role: what a node's agent and workers (and their
	// containers) call, reading and writing checkpoints.
	ForInstance = "instance"
)

// Placeholders of a policy written without a spec: the reader puts in their own.
const (
	PlaceholderBucket  = "BUCKET"
	PlaceholderPrefix  = "PREFIX"
	PlaceholderAccount = "ACCOUNT_ID"
	PlaceholderRole    = "INSTANCE_ROLE"
)

// PolicyDocument is an IAM policy document, as `aws iam create-policy --policy-document`
// takes it.
type PolicyDocument struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a PolicyDocument: always an Allow.
type Statement struct {
	Sid       string                         `json:"Sid"`
	Effect    string                         `json:"Effect"`
	Action    []string                       `json:"Action"`
	Resource  []string                       `json:"Resource"`
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
	// Why says what the code calls the actions for; IAM has no place for it.
	Why string `json:"-"`
}

// Allows says whether some statement names action (such as ec2:RunInstances). Resources and
// conditions are not weighed: they narrow where an action applies, not which code may call it.
func (d PolicyDocument) Allows(action string) bool {
	return slices.ContainsFunc(d.Statement, func(s Statement) bool { return slices.Contains(s.Action, action) })
}

// Actions are every action the document names, sorted.
func (d PolicyDocument) Actions() []string {
	var out []string
	for _, s := range d.Statement {
		out = append(out, s.Action...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Without is the document less action (a test's way to see that each action is needed).
func (d PolicyDocument) Without(action string) PolicyDocument {
	out := PolicyDocument{Version: d.Version}
	for _, s := range d.Statement {
		s.Action = slices.DeleteFunc(slices.Clone(s.Action), func(a string) bool { return a == action })
		if len(s.Action) > 0 {
			out.Statement = append(out.Statement, s)
		}
	}
	return out
}

// Policy is the least-privilege policy of who (ForDriver or ForInstance) for what this code
// calls: EC2 on the run's own resources where IAM can tell them (the rubberband:run tag), the
// Price List and Service Quotas APIs, iam:PassRole for the instance profile's role, and S3 on
// the checkpoint store's bucket and prefix only. exp, when given, names the bucket, prefix and
// instance profile; without one they are placeholders (Placeholder*). IAM passes a role, not a
// profile: the role is taken to have the profile's name, as the AWS console makes them.
func Policy(who string, exp *spec.Experiment) (PolicyDocument, error) {
	bucket, prefix, profile := PlaceholderBucket, PlaceholderPrefix, "arn:aws:iam::"+PlaceholderAccount+":instance-profile/"+PlaceholderRole
	if exp != nil {
		scheme, where, pre, err := spec.ParseCheckpoints(exp.Checkpoints.URL)
		if err != nil {
			return PolicyDocument{}, fmt.Errorf("ec2: policy: %w", err)
		}
		if scheme != "s3" {
			return PolicyDocument{}, errors.New("ec2: policy: the spec's checkpoints are not in S3 (checkpoints: {url: s3://BUCKET/PREFIX}), which instances need")
		}
		bucket, prefix, profile = where, strings.Trim(pre, "/"), ""
		if exp.Cluster.EC2 != nil {
			profile = exp.Cluster.EC2.InstanceProfile
		}
	}
	var out []Statement
	switch who {
	case ForDriver:
		out = driverStatements(profile)
	case ForInstance:
	default:
		return PolicyDocument{}, fmt.Errorf("ec2: policy: %q is neither %s nor %s", who, ForDriver, ForInstance)
	}
	out = append(out, s3Statements(who, bucket, prefix)...)
	for i := range out {
		out[i].Effect = "Allow"
		slices.Sort(out[i].Action)
	}
	return PolicyDocument{Version: "2012-10-17", Statement: out}, nil
}

// ownRun is the condition of an action on a resource rubberband tagged as a run's.
var ownRun = map[string]map[string][]string{"Null": {"ec2:ResourceTag/" + TagRun: {"false"}}}

func driverStatements(profile string) []Statement {
	out := []Statement{
		{Sid: "Describe", Resource: []string{"*"},
			Action: []string{"ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"},
			Why:    "find the run's instances and security group, its subnets' VPC; vCPUs of instance types (preflight, catalog refresh); spot prices"},
		{Sid: "Launch", Resource: []string{"*"}, Action: []string{"ec2:CreateSecurityGroup", "ec2:RunInstances"},
			Why: "rent the run's instances (and dry-run them in the preflight); make the run's security group"},
		{Sid: "TagOnLaunch", Resource: []string{"*"}, Action: []string{"ec2:CreateTags"},
			Condition: map[string]map[string][]string{"StringEquals": {"ec2:CreateAction": {"CreateSecurityGroup", "RunInstances"}}},
			Why:       "tag instances, volumes and the security group as they are made (only then)"},
		{Sid: "OwnResources", Resource: []string{"*"}, Action: []string{"ec2:AuthorizeSecurityGroupIngress", "ec2:DeleteSecurityGroup", "ec2:TerminateInstances"},
			Condition: ownRun,
			Why:       "open the run's group to its instances and driver, delete it, terminate instances: only what carries the tag " + TagRun},
		{Sid: "Prices", Resource: []string{"*"}, Action: []string{"pricing:GetProducts"},
			Why: "on-demand prices (prices, catalog refresh)"},
		{Sid: "Quotas", Resource: []string{"*"}, Action: []string{"servicequotas:GetServiceQuota"},
			Why: "vCPU quotas against the plan's peak (preflight)"},
	}
	if profile != "" {
		out = append(out, Statement{Sid: "PassInstanceRole", Resource: []string{roleArn(profile)}, Action: []string{"iam:PassRole"},
			Condition: map[string]map[string][]string{"StringEquals": {"iam:PassedToService": {"ec2.amazonaws.com"}}},
			Why:       "launch instances with the instance profile's role (cluster.ec2.instance_profile)"})
	}
	return out
}

// roleArn is the role of instance profile (a name or an ARN), taken to have its name, in its
// account and partition when the ARN says.
func roleArn(profile string) string {
	partition, account, name := "aws", "*", profile
	if rest, ok := strings.CutPrefix(profile, "arn:"); ok {
		parts := strings.SplitN(rest, ":", 5) // partition, iam, "", account, instance-profile/PATH/NAME
		if len(parts) == 5 {
			partition, account = parts[0], parts[3]
			name = parts[4][strings.LastIndex(parts[4], "/")+1:]
		}
	}
	return fmt.Sprintf("arn:%s:iam::%s:role/%s", partition, account, name)
}

// s3Statements are the checkpoint store's: listing the bucket under the prefix only, and the
// objects under it. The driver may also create the bucket, which it does when it is missing.
func s3Statements(who, bucket, prefix string) []Statement {
	list := Statement{Sid: "CheckpointBucket", Resource: []string{"arn:aws:s3:::" + bucket}, Action: []string{"s3:GetBucketLocation", "s3:ListBucket"},
		Why: "find the bucket and its region, list checkpoints under the prefix"}
	objects := "arn:aws:s3:::" + bucket + "/*"
	if prefix != "" {
		// IfExists: the bucket's existence and location are asked without a prefix.
		list.Condition = map[string]map[string][]string{"StringLikeIfExists": {"s3:prefix": {prefix, prefix + "/*"}}}
		objects = "arn:aws:s3:::" + bucket + "/" + prefix + "/*"
	}
	if who == ForDriver {
		list.Action = append(list.Action, "s3:CreateBucket")
		list.Why += "; create the bucket when it does not exist"
	}
	return []Statement{list, {Sid: "Checkpoints", Resource: []string{objects},
		Action: []string{"s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"},
		Why:    "read, write and delete checkpoints and the driver's heartbeat, under the prefix only"}}
}

// WriteText writes the policy for reading: each statement's purpose, actions, resources and
// conditions, what `rubberband iam-policy` prints.
func (doc PolicyDocument) WriteText(w io.Writer) {
	for _, s := range doc.Statement {
		fmt.Fprintf(w, "%s: %s\n  actions:   %s\n  resources: %s\n", s.Sid, s.Why, strings.Join(s.Action, ", "), strings.Join(s.Resource, ", "))
		for _, op := range slices.Sorted(maps.Keys(s.Condition)) {
			for _, k := range slices.Sorted(maps.Keys(s.Condition[op])) {
				fmt.Fprintf(w, "  condition: %s %s %s\n", op, k, strings.Join(s.Condition[op][k], ", "))
			}
		}
	}
	fmt.Fprintln(w, "(-o json prints the policy document)")
}
