package ec2sim

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestIMDS(t *testing.T) {
	s, c := start(t, Config{InstanceCredentials: &Credentials{AccessKeyID: "AKIDNODE", SecretAccessKey: "node-secret", SessionToken: "tok"}})
	in := runInput(helperScript(t, "creds"))
	in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String("rubberband-node")}
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	snap := waitState(t, s, id, StateRunning)

	// IMDSv2 only: no token, no metadata.
	resp, err := http.Get(snap.IMDS + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodPut, snap.IMDS+"/latest/api/token", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT token without a TTL: %s", resp.Status)
	}

	// The SDK's client, given the endpoint (the test's own environment disables IMDS).
	md := imds.New(imds.Options{Endpoint: snap.IMDS + "/", ClientEnableState: imds.ClientEnabled})
	for path, want := range map[string]string{
		"instance-id": id, "instance-type": "p3.2xlarge", "placement/availability-zone": "us-east-1a",
		"local-ipv4": "127.0.0.1", "instance-life-cycle": "on-demand",
	} {
		if got, err := metadata(t.Context(), md, path); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := metadata(t.Context(), md, "spot/instance-action"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("instance-action before any notice: %v", err)
	}
	ud, err := md.GetUserData(t.Context(), &imds.GetUserDataInput{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ud.Content)
	if !strings.Contains(string(body), "EC2SIM_HELPER=creds") {
		t.Errorf("user-data %q", body)
	}
	doc, err := md.GetInstanceIdentityDocument(t.Context(), &imds.GetInstanceIdentityDocumentInput{})
	if err != nil || doc.InstanceID != id || doc.Region != "us-east-1" {
		t.Errorf("identity document %+v, %v", doc, err)
	}

	// On the instance, the SDK's default chain finds the profile's credentials through IMDS.
	if got := waitFile(t, filepath.Join(snap.Dir, "root", "creds"), 10*time.Second); got != "AKIDNODE EC2RoleProvider" {
		t.Errorf("credentials on the instance: %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Instances()[0].IMDS != "" {
		t.Error("a terminated instance still has an IMDS")
	}
	once := imds.New(imds.Options{Endpoint: snap.IMDS + "/", ClientEnableState: imds.ClientEnabled, Retryer: aws.NopRetryer{}})
	if _, err := metadata(t.Context(), once, "instance-id"); err == nil {
		t.Error("the IMDS of a terminated instance still answers")
	}
}
