package ec2

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// productAttrs are the price-list attributes of the product rubberband rents: the type in
// region, Linux, shared tenancy, no pre-installed software, capacity used (not reserved).
func productAttrs(typ, region string) map[string]string {
	return map[string]string{"instanceType": typ, "regionCode": region, "operatingSystem": "Linux",
		"tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
}

// priceFilters are TERM_MATCH filters on attrs, in a stable order.
func priceFilters(attrs map[string]string) []pricingtypes.Filter {
	keys := slices.Sorted(maps.Keys(attrs))
	out := make([]pricingtypes.Filter, 0, len(keys))
	for _, k := range keys {
		out = append(out, pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(k), Value: aws.String(attrs[k])})
	}
	return out
}

// priceListItem is the part of a price-list product (GetProducts gives each as a JSON
// document in a string) that holds its on-demand price. Reserved terms are left out.
type priceListItem struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			EffectiveDate   string `json:"effectiveDate"`
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// parsePriceListItem is a product's lowest hourly on-demand price in USD and when it took
// effect. hit is false for a product whose attributes are not attrs (the filters are checked
// again: a price that is not the Linux one must never pass for it), one sold on another market
// option than on-demand (capacity blocks), or one with no hourly price.
func parsePriceListItem(item string, attrs map[string]string) (perHour float64, at time.Time, hit bool, err error) {
	var p priceListItem
	if err := json.Unmarshal([]byte(item), &p); err != nil {
		return 0, time.Time{}, false, fmt.Errorf("price list item: %w", err)
	}
	for k, v := range attrs {
		if !strings.EqualFold(p.Product.Attributes[k], v) {
			return 0, time.Time{}, false, nil
		}
	}
	if m, ok := p.Product.Attributes["marketoption"]; ok && m != "OnDemand" {
		return 0, time.Time{}, false, nil
	}
	for _, term := range p.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			usd, ok := d.PricePerUnit["USD"]
			if !ok || d.Unit != "Hrs" {
				continue
			}
			v, err := parseUSD(usd)
			if err != nil {
				return 0, time.Time{}, false, fmt.Errorf("price list item of %s: %w", attrs["instanceType"], err)
			}
			// A zero rate is not a price (AWS lists $0 dimensions for some SKUs).
			if v > 0 && (!hit || v < perHour) {
				perHour, hit = v, true
				at, _ = time.Parse(time.RFC3339, term.EffectiveDate) // the date only informs
			}
		}
	}
	return perHour, at, hit, nil
}

func parseUSD(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a price in dollars", s)
	}
	return v, nil
}
