package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// startEC2Sim starts a fake EC2 and returns the environment that points the binary's AWS SDK
// at it, with none of this machine's AWS configuration let in; the test process gets it too
// (with t.Setenv), for renting instances beforehand.
func startEC2Sim(t *testing.T) (*ec2sim.Server, []string) {
	t.Helper()
	s, env := ec2sim.StartForTestEnv(t, ec2sim.Config{KillGrace: 300 * time.Millisecond})
	t.Setenv("RUBBERBAND_BACKEND", "")
	return s, append(env, "RUBBERBAND_BACKEND=")
}

type priceRow struct {
	InstanceType string  `json:"instance_type"`
	Market       string  `json:"market"`
	Zone         string  `json:"zone"`
	PerHour      float64 `json:"per_hour"`
	Source       string  `json:"source"`
	Note         string  `json:"note"`
	At           string  `json:"at"`
}

// `prices -o json` gives both markets of each type from AWS, each with its source: one
// on-demand price, one spot price per zone.
func TestPricesJSON(t *testing.T) {
	_, env := startEC2Sim(t)
	out, errOut, code := rbEnv(t, binary, env, "prices", "p3.2xlarge", "p3.8xlarge", "--market", "all", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Region string     `json:"region"`
		Prices []priceRow `json:"prices"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := []string{
		"p3.2xlarge on-demand  3.06 pricing-api", "p3.2xlarge spot us-east-1a 0.918 spot-price-history", "p3.2xlarge spot us-east-1b 0.918 spot-price-history",
		"p3.8xlarge on-demand  12.24 pricing-api", "p3.8xlarge spot us-east-1a 3.68 spot-price-history", "p3.8xlarge spot us-east-1b 3.68 spot-price-history",
	}
	if got.Region != "us-east-1" || len(got.Prices) != len(want) {
		t.Fatalf("region %q, prices %+v", got.Region, got.Prices)
	}
	for i, p := range got.Prices {
		line := fmt.Sprintf("%s %s %s %g %s", p.InstanceType, p.Market, p.Zone, p.PerHour, p.Source)
		if line != want[i] || p.At == "" || p.Note != "" {
			t.Errorf("price %d: %q (at %q, note %q), want %q", i, line, p.At, p.Note, want[i])
		}
	}
}

// The table names each price's source; with the price list denied, on-demand prices come from
// the catalog, and a note says why.
func TestPricesTableFallsBack(t *testing.T) {
	s, env := startEC2Sim(t)
	s.Deny("GetProducts", true)
	out, errOut, code := rbEnv(t, binary, env, "prices", "p3.8xlarge", "--region", "us-east-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"region us-east-1\n", "TYPE", "MARKET", "ZONE", "$/HOUR", "SOURCE",
		"\nnote: p3.8xlarge on-demand from the catalog: GetProducts: AccessDeniedException: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rowsWant := map[string][]string{"on-demand": {"12.2400", "catalog (offline)"}, "us-east-1a": {"3.6800", "spot-price-history"}}
	for key, cells := range rowsWant {
		for _, cell := range cells {
			if !strings.Contains(lineWith(out, key), cell) {
				t.Errorf("row %s lacks %q:\n%s", key, cell, out)
			}
		}
	}
}

// Bad arguments exit 2 and say what is wrong; only an unknown type needs AWS's word (the
// fake's price list and spot history know no p9.huge), and nothing else is asked.
func TestPricesBadArguments(t *testing.T) {
	s, env := startEC2Sim(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"prices"}, "at least one instance TYPE"},
		{[]string{"prices", "p3.2xlarge", "--market", "reserved"}, `--market "reserved"`},
		{[]string{"prices", "p3.2xlarge", "-o", "yaml"}, `--output "yaml"`},
		{[]string{"prices", "p3.2xlarge", "--region", "Mars"}, `--region "Mars"`},
		{[]string{"prices", "p3.2xlarge", "p9.huge"}, "unknown instance type(s) p9.huge"},
	} {
		out, errOut, code := rbEnv(t, binary, env, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, errOut, c.want)
		}
	}
	for _, call := range s.Calls() {
		if call.Action != "GetProducts" && call.Action != "DescribeSpotPriceHistory" {
			t.Errorf("unexpected call %s", call.Action)
		}
	}
}

// Offline, an instance type the catalog does not know has no price and exits 1, as the help
// says (it said 2, which only a type AWS says does not exist gets: offline, it may exist), and
// the AWS SDK's own warnings ("falling back to IMDSv1", from looking for credentials off EC2)
// stay out of the output.
func TestPricesOffline(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "forbidden", http.StatusForbidden) }))
	defer imds.Close()
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	env := []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_CONFIG_FILE=" + empty,
		"AWS_SHARED_CREDENTIALS_FILE=" + empty, "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL, "AWS_ENDPOINT_URL=http://127.0.0.1:1",
		"AWS_REGION=us-east-1", "RUBBERBAND_BACKEND="}
	out, errOut, code := rbEnv(t, binary, env, "prices", "p9.huge")
	if code != 1 || out != "" || !strings.Contains(errOut, "no on-demand price for p9.huge: ") || !strings.Contains(errOut, "and the catalog has none") ||
		strings.Contains(errOut, "WARN") {
		t.Errorf("an unknown type offline: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	help, _, _ := rbEnv(t, binary, env, "prices", "--help")
	if !strings.Contains(help, "1 for a type with no price at all, as one the catalog does not know is while AWS cannot") {
		t.Errorf("the help does not say so:\n%s", help)
	}
	out, errOut, code = rbEnv(t, binary, env, "prices", "p3.2xlarge", "--market", "on-demand")
	if code != 0 || !strings.Contains(out, "catalog (offline)") || errOut != "" {
		t.Errorf("a known type offline: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
