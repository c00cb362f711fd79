package ec2

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// realItem is a GetProducts PriceList entry in AWS's shape (us-east-1 p3.2xlarge Linux, as the
// Price List API returns it, reserved terms included), with the attributes and prices
// swappable.
const realItem = `{"product":{"productFamily":"Compute Instance","attributes":{"enhancedNetworkingSupported":"Yes",
"intelTurboAvailable":"Yes","memory":"61 GiB","dedicatedEbsThroughput":"1750 Mbps","vcpu":"8","classicnetworkingsupport":"false",
"capacitystatus":"Used","locationType":"AWS Region","storage":"EBS only","instanceFamily":"GPU instance",
"operatingSystem":"OS","intelAvx2Available":"Yes","regionCode":"us-east-1","physicalProcessor":"Intel Xeon E5-2686 v4 (Broadwell)",
"clockSpeed":"2.3 GHz","ecu":"31","networkPerformance":"Up to 10 Gigabit","servicename":"Amazon Elastic Compute Cloud",
"gpuMemory":"16 GiB","vpcnetworkingsupport":"true","instanceType":"p3.2xlarge","tenancy":"Shared","usagetype":"BoxUsage:p3.2xlarge",
"normalizationSizeFactor":"16","intelAvxAvailable":"Yes","processorFeatures":"Intel AVX; Intel AVX2; Intel Turbo",
"servicecode":"AmazonEC2","licenseModel":"No License required","currentGeneration":"Yes","preInstalledSw":"NA",
"location":"US East (N. Virginia)","processorArchitecture":"64-bit","marketoption":"MARKET","operation":"RunInstances",
"availabilityzone":"NA","gpu":"1"},"sku":"CGJXHFUSGE546RV6"},"serviceCode":"AmazonEC2",
"terms":{"OnDemand":{"CGJXHFUSGE546RV6.JRTCKXETXF":{"priceDimensions":{"CGJXHFUSGE546RV6.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs",
"endRange":"Inf","description":"$3.06 per On Demand Linux p3.2xlarge Instance Hour","appliesTo":[],
"rateCode":"CGJXHFUSGE546RV6.JRTCKXETXF.6YS6EN2CT7","beginRange":"0","pricePerUnit":{"USD":"PRICE"}}},
"sku":"CGJXHFUSGE546RV6","effectiveDate":"2025-06-01T00:00:00Z","offerTermCode":"JRTCKXETXF","termAttributes":{}}},
"Reserved":{"CGJXHFUSGE546RV6.6QCMYABX3D":{"priceDimensions":{"CGJXHFUSGE546RV6.6QCMYABX3D.2TG2D8R56U":{"unit":"Quantity",
"description":"Upfront Fee","appliesTo":[],"rateCode":"CGJXHFUSGE546RV6.6QCMYABX3D.2TG2D8R56U","pricePerUnit":{"USD":"16154"}},
"CGJXHFUSGE546RV6.6QCMYABX3D.6YS6EN2CT7":{"unit":"Hrs","endRange":"Inf","description":"USD 0.0 per Linux/UNIX (Amazon VPC), p3.2xlarge reserved instance applied",
"appliesTo":[],"rateCode":"CGJXHFUSGE546RV6.6QCMYABX3D.6YS6EN2CT7","beginRange":"0","pricePerUnit":{"USD":"0.0000000000"}}},
"sku":"CGJXHFUSGE546RV6","effectiveDate":"2025-06-01T00:00:00Z","offerTermCode":"6QCMYABX3D",
"termAttributes":{"LeaseContractLength":"1yr","OfferingClass":"standard","PurchaseOption":"All Upfront"}}}},
"version":"20250601000000","publicationDate":"2025-06-01T00:00:00Z"}`

func item(os, market, price string) string {
	r := strings.NewReplacer(`"OS"`, `"`+os+`"`, `"MARKET"`, `"`+market+`"`, `"PRICE"`, `"`+price+`"`)
	return r.Replace(realItem)
}

// The on-demand hourly price is read from terms.OnDemand, never from the reserved terms (an
// upfront fee, a $0 hourly rate); a product the filters should have kept out (Windows, a
// capacity block, another type) gives none, whatever the server sent.
func TestPricesParseListItem(t *testing.T) {
	attrs := productAttrs("p3.2xlarge", "us-east-1")
	per, at, hit, err := parsePriceListItem(item("Linux", "OnDemand", "3.0600000000"), attrs)
	if err != nil || !hit || per != 3.06 || !at.Equal(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%v %v %v %v", per, at, hit, err)
	}
	for _, c := range []struct{ name, item string }{
		{"windows", item("Windows", "OnDemand", "3.6")},
		{"capacity block", item("Linux", "CapacityBlock", "2.1")},
		{"zero rate", item("Linux", "OnDemand", "0.0000000000")},
	} {
		if _, _, hit, err := parsePriceListItem(c.item, attrs); hit || err != nil {
			t.Errorf("%s: hit %v, %v", c.name, hit, err)
		}
	}
	if _, _, hit, err := parsePriceListItem(item("Linux", "OnDemand", "3.06"), productAttrs("p3.8xlarge", "us-east-1")); hit || err != nil {
		t.Errorf("another type: hit %v, %v", hit, err)
	}
	if _, _, _, err := parsePriceListItem(item("Linux", "OnDemand", "three"), attrs); err == nil || !strings.Contains(err.Error(), `"three" is not a price`) {
		t.Errorf("bad price: %v", err)
	}
	if _, _, _, err := parsePriceListItem(`{"product":`, attrs); err == nil {
		t.Error("no error for a truncated item")
	}
}

func TestPricesFilters(t *testing.T) {
	fs := priceFilters(productAttrs("p3.2xlarge", "eu-west-1"))
	var got []string
	for _, f := range fs {
		got = append(got, *f.Field+"="+*f.Value+"/"+string(f.Type))
	}
	want := "capacitystatus=Used/TERM_MATCH instanceType=p3.2xlarge/TERM_MATCH operatingSystem=Linux/TERM_MATCH " +
		"preInstalledSw=NA/TERM_MATCH regionCode=eu-west-1/TERM_MATCH tenancy=Shared/TERM_MATCH"
	if strings.Join(got, " ") != want {
		t.Fatal(got)
	}
}

// DescribeInstanceTypes words bandwidth several ways; "up to" is taken at its cap, words alone
// give no figure, and then the network cards' peaks are summed.
func TestNetworkGbps(t *testing.T) {
	perf := func(s string) *ec2types.NetworkInfo { return &ec2types.NetworkInfo{NetworkPerformance: aws.String(s)} }
	cards := &ec2types.NetworkInfo{NetworkPerformance: aws.String("High"), NetworkCards: []ec2types.NetworkCardInfo{
		{PeakBandwidthInGbps: aws.Float64(100)}, {PeakBandwidthInGbps: aws.Float64(100)}}}
	for _, tc := range []struct {
		in   *ec2types.NetworkInfo
		want float64
	}{
		{perf("25 Gigabit"), 25}, {perf("Up to 12.5 Gigabit"), 12.5}, {perf("4x 100 Gigabit"), 400},
		{perf("8 x 400 Gigabit"), 3200}, {perf("12500 Megabit"), 12.5}, {perf("Moderate"), 0}, {cards, 200}, {nil, 0},
	} {
		if got := networkGbps(tc.in); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.in, got, tc.want)
		}
	}
}
