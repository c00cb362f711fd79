package ec2

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Price is what one instance type costs an hour on one market, and where that figure comes
// from.
type Price struct {
	InstanceType string       `json:"instance_type"`
	Market       cloud.Market `json:"market"`
	// Zone is the availability zone of a spot price from the history; "" for on-demand (one
	// price per region) and for the catalog's.
	Zone    string  `json:"zone,omitempty"`
	PerHour float64 `json:"per_hour"`
	// Source is one of the Source* constants.
	Source string `json:"source"`
	// Note says why AWS's price is not used, when Source is SourceCatalog.
	Note string `json:"note,omitempty"`
	// At is when the price took effect, as its source says (the spot history's timestamp, the
	// price list term's effective date); zero for the catalog's.
	At time.Time `json:"at,omitzero"`
}

// Sources of a Price.
const (
	SourcePricingAPI  = "pricing-api"
	SourceSpotHistory = "spot-price-history"
	SourceCatalog     = "catalog (offline)"
)

// UnknownTypesError names instance types that neither AWS (which answered) nor the catalog
// knows, or that are no instance type's name at all.
type UnknownTypesError struct {
	Types  []string
	Region string
}

func (e *UnknownTypesError) Error() string {
	return fmt.Sprintf("unknown instance type(s) %s: neither AWS's prices in %s nor the catalog have them",
		strings.Join(e.Types, ", "), e.Region)
}

const (
	// pricingRegion: the Price List API is served from us-east-1 (and two other regions)
	// whatever region is priced, and refuses requests signed for any other.
	pricingRegion = "us-east-1"
	// linuxSpot is the spot history's product of a Linux AMI, what rubberband rents.
	linuxSpot = "Linux/UNIX"
	// apiTimeout bounds each source's calls: an endpoint that does not answer falls back to
	// the catalog in time.
	apiTimeout = 20 * time.Second
)

// Prices looks up what types cost an hour in region on market (empty: both markets):
// on-demand from the Price List API (Linux, shared tenancy, no pre-installed software), spot
// from the spot price history (the latest Linux/UNIX price per zone). Where AWS gives no price
// (it failed: no credentials, no network, access denied; or it has none for the type) the
// catalog's is used, with Source SourceCatalog and Note saying why: cat's, the built-in one when
// cat is nil. A cfg without a
// retryer gets an adaptive one with few attempts, so that an unreachable AWS falls back soon.
//
// Types that neither knows are an *UnknownTypesError. A type and market with no price at all
// (AWS failed and the catalog lacks it) is an error returned with the prices that were found.
// The result is sorted by type, market, price and zone.
func Prices(ctx context.Context, cfg aws.Config, region string, types []string, market cloud.Market, cat spec.InstanceCatalog) ([]Price, error) {
	if cat == nil {
		cat = spec.BuiltinCatalog()
	}
	markets := []cloud.Market{cloud.OnDemand, cloud.Spot}
	switch market {
	case "":
	case cloud.OnDemand, cloud.Spot:
		markets = []cloud.Market{market}
	default:
		return nil, fmt.Errorf("ec2: prices: market %q is neither %s nor %s", market, cloud.OnDemand, cloud.Spot)
	}
	if region == "" {
		return nil, errors.New("ec2: prices: no region")
	}
	var valid, unknown []string
	for _, t := range types {
		switch {
		case slices.Contains(valid, t) || slices.Contains(unknown, t):
		case spec.IsInstanceTypeName(t):
			valid = append(valid, t)
		default:
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		return nil, &UnknownTypesError{Types: unknown, Region: region}
	}
	if len(valid) == 0 {
		return nil, errors.New("ec2: prices: no instance type")
	}
	if cfg.Retryer == nil {
		cfg.Retryer = quickRetryer
	}
	// Both markets at once: offline, each waits out its retries.
	found := make([]map[string]answer, len(markets))
	var wg sync.WaitGroup
	for i, m := range markets {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, apiTimeout)
			defer cancel()
			if m == cloud.OnDemand {
				found[i] = onDemandPrices(actx, pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = pricingRegion }), region, valid)
			} else {
				found[i] = spotPrices(actx, ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.Region = region }), region, valid)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ec2: prices: %w", err)
	}
	var out []Price
	var missing []error
	for _, t := range valid {
		row, inCatalog := cat.Lookup(t)
		builtin, _ := spec.LookupInstance(t)
		known := inCatalog
		for i, m := range markets {
			a := found[i][t]
			known = known || len(a.prices) > 0 || a.failed // a source that failed cannot say a type does not exist
			if len(a.prices) > 0 {
				out = append(out, a.prices...)
				continue
			}
			if p := catalogPrice(row, m); p > 0 {
				note := a.why
				if region != DefaultRegion && row == builtin {
					note += " (the catalog's prices are " + DefaultRegion + "'s)"
				}
				out = append(out, Price{InstanceType: t, Market: m, PerHour: p, Source: SourceCatalog, Note: note})
				continue
			}
			missing = append(missing, fmt.Errorf("no %s price for %s: %s, and the catalog has none", m, t, a.why))
		}
		if !known {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		return nil, &UnknownTypesError{Types: unknown, Region: region}
	}
	slices.SortStableFunc(out, func(a, b Price) int {
		return cmp.Or(cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Market, b.Market),
			cmp.Compare(a.PerHour, b.PerHour), cmp.Compare(a.Zone, b.Zone))
	})
	if len(missing) > 0 {
		return out, fmt.Errorf("ec2: prices: %w", errors.Join(missing...))
	}
	return out, nil
}

// answer is what one source said of one type: its prices, or why it gave none. failed: the
// source did not answer at all.
type answer struct {
	prices []Price
	why    string
	failed bool
}

func catalogPrice(it spec.InstanceType, m cloud.Market) float64 {
	if m == cloud.Spot {
		return it.SpotPricePerHour
	}
	return it.PricePerHour
}

// why is a failed call as a note: AWS's code and message, or the SDK's error when AWS was not
// reached.
func why(op string, err error) string {
	if code := apiCode(err); code != "" {
		return fmt.Sprintf("%s: %s: %s", op, code, apiMessage(err))
	}
	return fmt.Sprintf("%s: %v", op, err)
}

// onDemandPrices asks the price list type by type. Once a call fails for a reason that is not
// the type's, the rest are not asked: they would fail the same way, each after its retries.
func onDemandPrices(ctx context.Context, c *pricing.Client, region string, types []string) map[string]answer {
	out := map[string]answer{}
	var down error
	for _, t := range types {
		if down != nil {
			out[t] = answer{why: why("GetProducts", down), failed: true}
			continue
		}
		p, ok, err := onDemandPrice(ctx, c, region, t)
		switch {
		case err != nil:
			down = err
			out[t] = answer{why: why("GetProducts", err), failed: true}
		case !ok:
			out[t] = answer{why: fmt.Sprintf("the price list has no Linux on-demand price for %s in %s", t, region)}
		default:
			out[t] = answer{prices: []Price{p}}
		}
	}
	return out
}

// onDemandPrice is the lowest hourly price of the type's Linux products in region: with these
// filters AWS lists one product, and the lowest is the right pick should it list more.
func onDemandPrice(ctx context.Context, c *pricing.Client, region, typ string) (Price, bool, error) {
	attrs := productAttrs(typ, region)
	in := &pricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"),
		MaxResults:    aws.Int32(100),
		Filters:       priceFilters(attrs),
	}
	var best Price
	ok := false
	pages := pricing.NewGetProductsPaginator(c, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return Price{}, false, err
		}
		for _, item := range page.PriceList {
			per, at, hit, err := parsePriceListItem(item, attrs)
			if err != nil {
				return Price{}, false, err
			}
			if hit && (!ok || per < best.PerHour) {
				best = Price{InstanceType: typ, Market: cloud.OnDemand, PerHour: per, Source: SourcePricingAPI, At: at}
				ok = true
			}
		}
	}
	return best, ok, nil
}

// spotPrices asks the spot history type by type, so that a type EC2 rejects does not cost the
// others their prices.
func spotPrices(ctx context.Context, c *ec2.Client, region string, types []string) map[string]answer {
	out := map[string]answer{}
	var down error
	for _, t := range types {
		if down != nil {
			out[t] = answer{why: why("DescribeSpotPriceHistory", down), failed: true}
			continue
		}
		ps, err := spotPrice(ctx, c, t)
		switch {
		case err != nil && (apiCode(err) == "InvalidParameterValue" || apiCode(err) == "InvalidInstanceType"):
			out[t] = answer{why: why("DescribeSpotPriceHistory", err)} // EC2 answered: no such type
		case err != nil:
			down = err
			out[t] = answer{why: why("DescribeSpotPriceHistory", err), failed: true}
		case len(ps) == 0:
			out[t] = answer{why: fmt.Sprintf("no %s spot price history for %s in %s", linuxSpot, t, region)}
		default:
			out[t] = answer{prices: ps}
		}
	}
	return out
}

// spotPrice is the latest Linux spot price of typ in each zone: asked from now, EC2 gives the
// price in force in each zone.
func spotPrice(ctx context.Context, c *ec2.Client, typ string) ([]Price, error) {
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(c, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{ec2types.InstanceType(typ)},
		ProductDescriptions: []string{linuxSpot},
		StartTime:           aws.Time(time.Now()),
		MaxResults:          aws.Int32(1000),
	})
	latest := map[string]Price{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, h := range page.SpotPriceHistory {
			if string(h.InstanceType) != typ || string(h.ProductDescription) != linuxSpot {
				continue
			}
			per, err := parseUSD(aws.ToString(h.SpotPrice))
			if err != nil {
				return nil, fmt.Errorf("spot price of %s in %s: %w", typ, aws.ToString(h.AvailabilityZone), err)
			}
			az, at := aws.ToString(h.AvailabilityZone), aws.ToTime(h.Timestamp)
			if old, seen := latest[az]; !seen || at.After(old.At) {
				latest[az] = Price{InstanceType: typ, Market: cloud.Spot, Zone: az, PerHour: per, Source: SourceSpotHistory, At: at}
			}
		}
	}
	out := make([]Price, 0, len(latest))
	for _, p := range latest {
		out = append(out, p)
	}
	return out, nil
}
