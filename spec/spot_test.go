package spec

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The spot block's two spellings of the price are one value: whichever is given (or the
// catalog's, or the one a discount gives) fills both after defaulting, and HourlyPrice bills it.
func TestSpotPriceSpellings(t *testing.T) {
	for _, tc := range []struct {
		name, cluster string
		spot          float64
	}{
		{"catalog", "instance_type: p3.8xlarge", 3.68},
		{"catalog has none", "instance_type: p3.2xlarge", 0},
		{"old spelling", "gpus_per_node: 2, price_per_hour: 10, spot_price_per_hour: 4", 4},
		{"new spelling", "gpus_per_node: 2, price_per_hour: 10, spot: {price_per_hour: 3}", 3},
		{"new spelling over the catalog", "instance_type: p3.8xlarge, spot: {price_per_hour: 2.5}", 2.5},
		{"discount", "gpus_per_node: 2, price_per_hour: 10, spot: {discount: 0.7}", 3},
		{"discount over the catalog", "instance_type: p3.8xlarge, spot: {discount: 0.5}", 6.12},
		{"discount off a catalog price", "instance_type: p3.2xlarge, spot: {discount: 0.7}", 0.918},
		{"discount off a written price", "instance_type: p3.2xlarge, price_per_hour: 2, spot: {discount: 0.25}", 1.5},
	} {
		for _, market := range []string{MarketOnDemand, MarketSpot} {
			if tc.spot == 0 && market == MarketSpot {
				continue
			}
			t.Run(tc.name+"/"+market, func(t *testing.T) {
				exp, err := Parse("a.yaml", []byte(withField("cluster: {"+tc.cluster+", market: "+market+"}")), nil)
				if err != nil {
					t.Fatal(err)
				}
				c := exp.Cluster
				if math.Abs(c.SpotPricePerHour-tc.spot) > 1e-9 || c.Spot.PricePerHour != c.SpotPricePerHour {
					t.Errorf("spot_price_per_hour %v, spot.price_per_hour %v, want both %v", c.SpotPricePerHour, c.Spot.PricePerHour, tc.spot)
				}
				want := c.PricePerHour
				if market == MarketSpot {
					want = tc.spot
				}
				if math.Abs(c.HourlyPrice()-want) > 1e-9 {
					t.Errorf("HourlyPrice %v, want %v", c.HourlyPrice(), want)
				}
			})
		}
	}
}

// Left out, the notice is EC2's two minutes and the fallback on-demand, whatever the market;
// what the spec writes stays.
func TestSpotDefaults(t *testing.T) {
	for _, tc := range []struct {
		cluster  string
		notice   time.Duration
		fallback string
		life     *Dist
		rate     float64
	}{
		{"gpus_per_node: 2, price_per_hour: 1", 2 * time.Minute, FallbackOnDemand, nil, 0},
		{"instance_type: p3.8xlarge, market: spot", 2 * time.Minute, FallbackOnDemand, nil, 0},
		{"instance_type: p3.8xlarge, market: spot, spot: {notice: 30s, fallback: none, interruptions_per_hour: 0.5}", 30 * time.Second, FallbackNone, nil, 0.5},
		{"instance_type: p3.8xlarge, spot: {notice: 0s, interruptions_per_hour: 60}", 0, FallbackOnDemand, nil, 60},
		{"instance_type: p3.8xlarge, spot: {lifetimes: {dist: lognormal, mean: 2h, std: 1h}, notice: 1h}", time.Hour, FallbackOnDemand,
			&Dist{Kind: DistLogNormal, Mean: 7200, Std: 3600}, 0},
		{"instance_type: p3.8xlarge, spot: {lifetimes: {samples: [1h, 3h]}}", 2 * time.Minute, FallbackOnDemand,
			&Dist{Kind: DistEmpirical, Samples: []Seconds{3600, 10800}}, 0},
	} {
		exp, err := Parse("a.yaml", []byte(withField("cluster: {"+tc.cluster+"}")), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.cluster, err)
		}
		s := exp.Cluster.Spot
		if s.Notice.D() != tc.notice || s.Fallback != tc.fallback || s.InterruptionsPerHour != tc.rate {
			t.Errorf("%s: notice %v, fallback %q, rate %v", tc.cluster, s.Notice.D(), s.Fallback, s.InterruptionsPerHour)
		}
		if (s.Lifetimes == nil) != (tc.life == nil) || s.Lifetimes != nil && !equalDist(*s.Lifetimes, *tc.life) {
			t.Errorf("%s: lifetimes %+v, want %+v", tc.cluster, s.Lifetimes, tc.life)
		}
	}
}

func equalDist(a, b Dist) bool {
	if a.Kind != b.Kind || a.Value != b.Value || a.Mean != b.Mean || a.Std != b.Std || a.Min != b.Min || a.Max != b.Max || len(a.Samples) != len(b.Samples) {
		return false
	}
	for i := range a.Samples {
		if a.Samples[i] != b.Samples[i] {
			return false
		}
	}
	return true
}

// Every wrong spot value, and every pair of fields that exclude each other, is exactly one
// problem at its own path, with no follow-on (no "spot needs a spot price" after a bad discount).
func TestSpotProblems(t *testing.T) {
	const base = "gpus_per_node: 2, price_per_hour: 10, "
	for _, tc := range []struct{ cluster, path, msg string }{
		{base + "spot_price_per_hour: 3, spot: {price_per_hour: 3}", "cluster.spot.price_per_hour", "the same price as spot_price_per_hour"},
		{base + "market: spot, spot_price_per_hour: 3, spot: {price_per_hour: -1}", "cluster.spot.price_per_hour", "give one of the two"},
		{base + "spot: {price_per_hour: 3, discount: 0.5}", "cluster.spot.discount", "not both"},
		{base + "market: spot, spot_price_per_hour: 3, spot: {discount: 0.5}", "cluster.spot.discount", "not both"},
		{base + "spot: {interruptions_per_hour: 1, lifetimes: {value: 1h}}", "cluster.spot.lifetimes", "not both"},
		{base + "spot: {interruptions_per_hour: -1, lifetimes: {value: 1h}}", "cluster.spot.lifetimes", "not both"},
		{base + "market: spot, spot: {discount: 0}", "cluster.spot.discount", "out of range"},
		{base + "market: spot, spot: {discount: 1}", "cluster.spot.discount", "out of range"},
		{base + "market: spot, spot: {discount: -0.5}", "cluster.spot.discount", "out of range"},
		{base + "market: spot, spot: {discount: 70}", "cluster.spot.discount", "out of range"},
		{base + "market: spot, spot: {discount: lots}", "cluster.spot.discount", "not a number"},
		{base + "spot: {price_per_hour: -1}", "cluster.spot.price_per_hour", "out of range"},
		{base + "market: spot, spot: {price_per_hour: 100001}", "cluster.spot.price_per_hour", "out of range"},
		{base + "market: spot, spot: {price_per_hour: cheap}", "cluster.spot.price_per_hour", "not a number"},
		{base + "market: spot, spot: {price_per_hour: 0}", "cluster.spot.price_per_hour", "market spot needs a spot price"},
		{base + "market: spot, spot_price_per_hour: -2", "cluster.spot_price_per_hour", "out of range"},
		{base + "market: spot", "cluster.spot_price_per_hour", "set instance_type"},
		{"instance_type: p3.2xlarge, market: spot", "cluster.spot_price_per_hour", `the catalog has none for "p3.2xlarge"`},
		{"instance_type: p3.2xlarge, market: spot, spot: {interruptions_per_hour: 1}", "cluster.spot_price_per_hour", "spot.discount"},
		{"instance_type: p3.2xlarge, price_per_hour: cheap, market: spot, spot: {discount: 0.5}", "cluster.price_per_hour", "not a number"},
		{"instance_type: p3.2xlarge, price_per_hour: -3, market: spot, spot: {discount: 0.5}", "cluster.price_per_hour", "out of range"},
		{"instance_type: p9.huge, market: spot, spot: {discount: 0.5}", "cluster.instance_type", "unknown instance type"},
		{base + "spot: {interruptions_per_hour: -0.1}", "cluster.spot.interruptions_per_hour", "out of range"},
		{base + "spot: {interruptions_per_hour: 61}", "cluster.spot.interruptions_per_hour", "out of range"},
		{base + "spot: {lifetimes: {value: 0}}", "cluster.spot.lifetimes", "must live some time"},
		{base + "spot: {lifetimes: {dist: normal, mean: 0, std: 0}}", "cluster.spot.lifetimes", "must live some time"},
		{base + "spot: {lifetimes: {dist: gamma, mean: 1h}}", "cluster.spot.lifetimes.dist", "not a distribution"},
		{base + "spot: {lifetimes: {dist: uniform, min: 2h, max: 1h}}", "cluster.spot.lifetimes.max", "below min"},
		{base + "spot: {lifetimes: {dist: empirical, samples: []}}", "cluster.spot.lifetimes.samples", "at least one sample"},
		{base + "spot: {lifetimes: 1h}", "cluster.spot.lifetimes", "expected a mapping"},
		{base + "spot: {notice: -1s}", "cluster.spot.notice", "out of range"},
		{base + "spot: {notice: 61m}", "cluster.spot.notice", "out of range"},
		{base + "spot: {notice: soon}", "cluster.spot.notice", "not a duration"},
		{base + "spot: {fallback: wait}", "cluster.spot.fallback", `"wait" is not a fallback (on-demand or none)`},
		{base + "spot: {fallback: [none]}", "cluster.spot.fallback", "expected a string"},
		{base + "market: spot, spot: [discount, 0.5]", "cluster.spot", "expected a mapping"},
		{base + "spot: {interruption_rate: 1}", "cluster.spot.interruption_rate", "unknown field"},
	} {
		_, err := Parse("a.yaml", []byte(withField("cluster: {"+tc.cluster+"}")), nil)
		probs := problems(t, err)
		if len(probs) != 1 || probs[0].Path != tc.path || probs[0].Line != 4 || !strings.Contains(probs[0].Msg, tc.msg) {
			t.Errorf("%s: want one problem at line 4, %s: ...%s..., got\n%v", tc.cluster, tc.path, tc.msg, err)
		}
	}
}
