package ec2_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// awsConfig is the SDK's default chain, pointed at the fake by startSim's environment.
func awsConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := rbec2.LoadConfig(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// row is a price without its time, for comparing.
type row struct {
	typ    string
	market cloud.Market
	zone   string
	per    float64
	source string
}

func rows(ps []rbec2.Price) []row {
	out := make([]row, len(ps))
	for i, p := range ps {
		out[i] = row{p.InstanceType, p.Market, p.Zone, p.PerHour, p.Source}
	}
	return out
}

func sameRows(t *testing.T, got []rbec2.Price, want ...row) {
	t.Helper()
	g := rows(got)
	if len(g) != len(want) {
		t.Fatalf("prices:\n%v\nwant\n%v", g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Fatalf("price %d: %v, want %v (all: %v)", i, g[i], want[i], g)
		}
	}
}

// On-demand prices come from the price list (whose client is signed for us-east-1 whatever
// region is priced: the fake refuses anything else) for the priced region only, Linux and
// shared; spot prices from the history, the latest in each zone, sorted by type, market, price.
func TestPricesFromAPIs(t *testing.T) {
	s := startSim(t, ec2sim.Config{Region: "us-west-2"})
	if err := s.SetSpotPrice(testType, "us-west-2b", 1.2); err != nil {
		t.Fatal(err)
	}
	ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-west-2", []string{"p3.8xlarge", testType, testType}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	od, spot := rbec2.SourcePricingAPI, rbec2.SourceSpotHistory
	sameRows(t, ps,
		row{testType, cloud.OnDemand, "", 3.06, od},
		row{testType, cloud.Spot, "us-west-2a", 0.918, spot},
		row{testType, cloud.Spot, "us-west-2b", 1.2, spot},
		row{"p3.8xlarge", cloud.OnDemand, "", 12.24, od},
		row{"p3.8xlarge", cloud.Spot, "us-west-2a", 3.68, spot},
		row{"p3.8xlarge", cloud.Spot, "us-west-2b", 3.68, spot},
	)
	for _, p := range ps {
		if p.Note != "" || p.At.IsZero() {
			t.Errorf("%+v: a price from AWS has a time and no note", p)
		}
	}
	if !ps[2].At.After(ps[1].At) {
		t.Errorf("the changed spot price is not the latest: %v, %v", ps[1].At, ps[2].At)
	}
	if !ps[0].At.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("on-demand price took effect %v, want the term's effective date", ps[0].At)
	}

	ps, err = rbec2.Prices(t.Context(), awsConfig(t), "us-west-2", []string{"g5.xlarge"}, cloud.Spot, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, ps, row{"g5.xlarge", cloud.Spot, "us-west-2a", 0.3018, spot}, row{"g5.xlarge", cloud.Spot, "us-west-2b", 0.3018, spot})
	ps, err = rbec2.Prices(t.Context(), awsConfig(t), "us-west-2", []string{"g5.xlarge"}, cloud.OnDemand, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, ps, row{"g5.xlarge", cloud.OnDemand, "", 1.006, od}) // AWS's, not the catalog's
}

// Throttled calls are retried, and the prices still come from AWS.
func TestPricesThrottled(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.Throttle(2)
	ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{"p3.8xlarge"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Source == rbec2.SourceCatalog {
			t.Fatalf("%+v: throttling made it fall back", p)
		}
	}
	throttled := 0
	for _, c := range s.Calls() {
		if c.Error == "ThrottlingException" || c.Error == "RequestLimitExceeded" {
			throttled++
		}
	}
	if throttled != 2 || len(ps) != 3 {
		t.Fatalf("%d throttled calls, prices %v", throttled, rows(ps))
	}
}

// Denied by AWS, each market falls back to the catalog, with the source and AWS's reason; a
// type the catalog has no spot price for is an error, returned with the prices found.
func TestPricesFallBackWhenDenied(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.Deny("GetProducts", true)
	s.Deny("DescribeSpotPriceHistory", true)
	ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{testType, "p3.8xlarge"}, "", nil)
	mustContain(t, err, "no spot price for p3.2xlarge", "UnauthorizedOperation", "the catalog has none")
	var unknown *rbec2.UnknownTypesError
	if errors.As(err, &unknown) {
		t.Fatalf("%v: a known type is not unknown", err)
	}
	cat := rbec2.SourceCatalog
	sameRows(t, ps,
		row{testType, cloud.OnDemand, "", 3.06, cat},
		row{"p3.8xlarge", cloud.OnDemand, "", 12.24, cat},
		row{"p3.8xlarge", cloud.Spot, "", 3.68, cat},
	)
	for _, p := range ps {
		want := "GetProducts: AccessDeniedException"
		if p.Market == cloud.Spot {
			want = "DescribeSpotPriceHistory: UnauthorizedOperation"
		}
		if !strings.HasPrefix(p.Note, want) || !p.At.IsZero() {
			t.Errorf("%+v: want a note starting %q and no time", p, want)
		}
	}
	// The second type was not asked: the first call said the service would not answer.
	if n := countCalls(s, "GetProducts"); n != 1 {
		t.Errorf("%d GetProducts calls after the first was denied", n)
	}
	// Outside us-east-1 the note says whose prices the catalog's are.
	ps, err = rbec2.Prices(t.Context(), awsConfig(t), "eu-west-1", []string{"p3.8xlarge"}, cloud.OnDemand, nil)
	if err != nil || len(ps) != 1 || !strings.HasSuffix(ps[0].Note, "(the catalog's prices are us-east-1's)") {
		t.Fatalf("%+v, %v", ps, err)
	}
}

func countCalls(s *ec2sim.Server, action string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Action == action {
			n++
		}
	}
	return n
}

// With AWS unreachable, or no credentials, the catalog answers within seconds, saying why.
func TestPricesFallBackOffline(t *testing.T) {
	startSim(t, ec2sim.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unreachable", map[string]string{"AWS_ENDPOINT_URL_PRICING": dead, "AWS_ENDPOINT_URL_EC2": dead}, "connection refused"},
		{"no credentials", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "credentials"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			start := time.Now()
			ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{"p3.8xlarge", "g3.8xlarge"}, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("fell back after %v", d)
			}
			if len(ps) != 4 {
				t.Fatalf("prices %v", rows(ps))
			}
			for _, p := range ps {
				if p.Source != rbec2.SourceCatalog || !strings.Contains(p.Note, c.want) {
					t.Errorf("%+v: want the catalog, with a note saying %q", p, c.want)
				}
			}
		})
	}
}

// A type neither AWS nor the catalog knows is an *UnknownTypesError naming it; so is a name
// that is no type's. A type only AWS knows, with AWS denied, is an error of another kind: it
// may exist.
func TestPricesUnknownTypes(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	for _, c := range []struct {
		types []string
		want  []string
	}{
		{[]string{"p3.8xlarge", "p9.huge"}, []string{"p9.huge"}},
		{[]string{"not a type", "p3.2xlarge"}, []string{"not a type"}},
	} {
		ps, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", c.types, "", nil)
		var unknown *rbec2.UnknownTypesError
		if !errors.As(err, &unknown) || strings.Join(unknown.Types, ",") != strings.Join(c.want, ",") || ps != nil {
			t.Fatalf("%v: %v, %v; want unknown %v", c.types, ps, err, c.want)
		}
		mustContain(t, err, c.want[0], "neither AWS's prices in us-east-1 nor the catalog")
	}
	s.Deny("GetProducts", true)
	_, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{"c5.large"}, cloud.OnDemand, nil)
	var unknown *rbec2.UnknownTypesError
	if errors.As(err, &unknown) {
		t.Fatalf("%v: unknown while the price list was denied", err)
	}
	mustContain(t, err, "no on-demand price for c5.large", "AccessDeniedException")
	if _, err := rbec2.Prices(t.Context(), awsConfig(t), "us-east-1", []string{testType}, "reserved", nil); err == nil {
		t.Fatal("no error for market reserved")
	}
}
