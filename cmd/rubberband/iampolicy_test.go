package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// implied are the actions of the driver's policy that no recorded call names: IAM asks for
// them inside another call.
var implied = map[string]string{
	"ec2:CreateTags": "tagging on creation, inside RunInstances and CreateSecurityGroup",
	"iam:PassRole":   "RunInstances with an instance profile",
}

// printedPolicy is the driver's policy as `rubberband iam-policy -o json` prints it.
func printedPolicy(t testing.TB) rbec2.PolicyDocument {
	t.Helper()
	out, errOut, code := rb(t, "iam-policy", "-o", "json")
	var doc rbec2.PolicyDocument
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Statement) == 0 {
		t.Fatalf("iam-policy -o json: exit %d: %s\n%s", code, errOut, out)
	}
	return doc
}

// notAllowed are the actions of called that doc does not allow.
func notAllowed(doc rbec2.PolicyDocument, called []string) []string {
	return slices.DeleteFunc(slices.Clone(called), doc.Allows)
}

// checkPolicy fails t when the fake answered a call whose action the printed policy does not
// allow: the policy would break what the test just did.
func checkPolicy(t *testing.T, sim *ec2sim.Server) {
	t.Helper()
	if missing := notAllowed(printedPolicy(t), sim.Actions()); len(missing) > 0 {
		t.Errorf("`rubberband iam-policy` does not allow %v, which this test's commands called (all: %v)", missing, sim.Actions())
	}
}

// The policy `rubberband iam-policy` prints allows every call that a preflight (a run stopped by
// it), catalog refresh, prices and cleanup make, as the fake records them, and names nothing of
// EC2, Pricing or Service Quotas they do not call (but what IAM asks for inside a call). Without
// any one of the called actions, the check fails: each is needed, and the check can fail.
// Runs, cancels and resumes are checked by the EC2 tests that do them (checkPolicy).
func TestIAMPolicyAllowsWhatTheCommandsCall(t *testing.T) {
	dir := t.TempDir()
	sim, specFile, env := ec2Env(t, dir)
	for _, kv := range env { // this process rents an instance for cleanup to find
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// The preflight: the plan's peak needs more than the quota; the run stops before renting.
	sim.SetQuota(ec2sim.QuotaOnDemandG, 8)
	plan := planFile(t, dir, specFile, "4,4,2")
	if _, errOut, code := rbEnv(t, binary, env, "run", specFile, "--plan", plan, "--backend", "ec2", "--state", filepath.Join(dir, "state")); code == 0 ||
		!strings.Contains(errOut, "vCPU quota L-DB2E81BA") {
		t.Fatalf("a preflight that fails: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := rbEnv(t, binary, env, "catalog", "refresh", "--catalog", filepath.Join(dir, "catalog.json")); code != 0 {
		t.Fatalf("catalog refresh: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rbEnv(t, binary, env, "prices", "p3.2xlarge"); code != 0 {
		t.Fatalf("prices: exit %d: %s", code, errOut)
	}
	rent(t, "e2e-ec2", 1)
	if out, errOut, code := rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--all", "--yes"); code != 0 ||
		!strings.Contains(out, "terminated 1 instance") || !strings.Contains(out, "deleted 1 security group") {
		t.Fatalf("cleanup: exit %d\n%s%s", code, out, errOut)
	}
	if left := sim.SecurityGroups(); len(left) != 0 {
		t.Errorf("security groups left: %+v", left)
	}

	doc, called := printedPolicy(t), sim.Actions()
	if missing := notAllowed(doc, called); len(missing) > 0 {
		t.Fatalf("the policy does not allow %v (called: %v)", missing, called)
	}
	for _, a := range doc.Actions() {
		if !strings.HasPrefix(a, "s3:") && implied[a] == "" && !slices.Contains(called, a) { // S3 is MinIO's, not recorded
			t.Errorf("the policy allows %s, which nothing called: not least privilege", a)
		}
	}
	for _, a := range called {
		t.Run("without "+a, func(t *testing.T) {
			if missing := notAllowed(doc.Without(a), called); !slices.Equal(missing, []string{a}) {
				t.Fatalf("a policy without %s: the check finds %v missing, want [%s]", a, missing, a)
			}
		})
	}
	t.Logf("%d actions called, all allowed: %v", len(called), called)
}

// docs/ec2.md shows both policies exactly as `rubberband iam-policy -o json` prints them.
func TestIAMPolicyInDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/ec2.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, args := range [][]string{{"iam-policy", "-o", "json"}, {"iam-policy", "--for", "instance", "-o", "json"}} {
		out, errOut, code := rb(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		block := "<!-- rubberband " + strings.Join(args, " ") + " -->\n```json\n" + out + "```\n"
		if !strings.Contains(doc, block) {
			t.Errorf("docs/ec2.md lacks, or has another text for, `rubberband %s`; want:\n%s", strings.Join(args, " "), block)
		}
	}
}
