package ec2_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/spec"
)

// statement is the statement of doc that names action.
func statement(t *testing.T, doc rbec2.PolicyDocument, action string) rbec2.Statement {
	t.Helper()
	for _, s := range doc.Statement {
		if slices.Contains(s.Action, action) {
			return s
		}
	}
	t.Fatalf("no statement allows %s", action)
	return rbec2.Statement{}
}

// The driver's policy scopes what IAM can scope: terminating and deleting to what carries the
// run tag, tagging to creation, PassRole to the profile's role for EC2, S3 to the spec's bucket
// and prefix. The instances' role gets S3 on the prefix and nothing of EC2. Without a spec the
// names are placeholders; a spec whose checkpoints are not in S3 is refused.
func TestPolicy(t *testing.T) {
	exp := &spec.Experiment{Checkpoints: spec.Checkpoints{URL: "s3://ckpt-bucket/team/a/"},
		Cluster: spec.Cluster{EC2: &spec.EC2{InstanceProfile: "arn:aws:iam::210987654321:instance-profile/ml/rb-node"}}}
	driver, err := rbec2.Policy(rbec2.ForDriver, exp)
	if err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]string{
		"ec2:TerminateInstances":  `{"Null":{"ec2:ResourceTag/rubberband:run":["false"]}}`,
		"ec2:DeleteSecurityGroup": `{"Null":{"ec2:ResourceTag/rubberband:run":["false"]}}`,
		"ec2:CreateTags":          `{"StringEquals":{"ec2:CreateAction":["CreateSecurityGroup","RunInstances"]}}`,
		"iam:PassRole":            `{"StringEquals":{"iam:PassedToService":["ec2.amazonaws.com"]}}`,
		"s3:ListBucket":           `{"StringLikeIfExists":{"s3:prefix":["team/a","team/a/*"]}}`,
	} {
		b, _ := json.Marshal(statement(t, driver, action).Condition)
		if string(b) != want {
			t.Errorf("%s: condition %s, want %s", action, b, want)
		}
	}
	for action, want := range map[string]string{"iam:PassRole": "arn:aws:iam::210987654321:role/rb-node",
		"s3:PutObject": "arn:aws:s3:::ckpt-bucket/team/a/*", "s3:CreateBucket": "arn:aws:s3:::ckpt-bucket", "ec2:RunInstances": "*"} {
		if got := statement(t, driver, action).Resource; !slices.Equal(got, []string{want}) {
			t.Errorf("%s on %v, want %s", action, got, want)
		}
	}
	instance, err := rbec2.Policy(rbec2.ForInstance, exp)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range instance.Actions() {
		if !strings.HasPrefix(a, "s3:") || a == "s3:CreateBucket" {
			t.Errorf("the instances' role may %s", a)
		}
	}
	if !instance.Allows("s3:GetObject") || instance.Without("s3:GetObject").Allows("s3:GetObject") || !instance.Allows("s3:GetObject") {
		t.Error("Without does not remove an action, or changes the document it is called on")
	}

	noProfile := *exp
	noProfile.Cluster.EC2 = &spec.EC2{}
	if doc, _ := rbec2.Policy(rbec2.ForDriver, &noProfile); doc.Allows("iam:PassRole") {
		t.Error("a spec without an instance profile passes a role")
	}
	placeholders, err := rbec2.Policy(rbec2.ForDriver, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(placeholders)
	for _, want := range []string{"arn:aws:s3:::BUCKET/PREFIX/*", "arn:aws:iam::ACCOUNT_ID:role/INSTANCE_ROLE"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("placeholders lack %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"Why"`) {
		t.Errorf("the document carries the explanations, which IAM refuses: %s", b)
	}
	if _, err := rbec2.Policy(rbec2.ForDriver, &spec.Experiment{Checkpoints: spec.Checkpoints{URL: "file:///tmp/x"}}); err == nil {
		t.Error("a spec with file checkpoints: no error")
	}
	if _, err := rbec2.Policy("nobody", nil); err == nil {
		t.Error("an unknown role: no error")
	}
}
