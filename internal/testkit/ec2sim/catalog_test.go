package ec2sim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	ptypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
)

// priceItem is the part of a price-list entry a provider reads.
type priceItem struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func termMatch(field, value string) ptypes.Filter {
	return ptypes.Filter{Type: ptypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

func TestGetProducts(t *testing.T) {
	_, c := start(t, Config{})
	out, err := c.pricing.GetProducts(t.Context(), &pricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"),
		Filters: []ptypes.Filter{termMatch("instanceType", "p3.8xlarge"), termMatch("regionCode", "us-east-1"),
			termMatch("operatingSystem", "Linux"), termMatch("tenancy", "Shared"),
			termMatch("preInstalledSw", "NA"), termMatch("capacitystatus", "Used")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.PriceList) != 1 {
		t.Fatalf("%d products, want 1", len(out.PriceList))
	}
	var item priceItem
	if err := json.Unmarshal([]byte(out.PriceList[0]), &item); err != nil {
		t.Fatal(err)
	}
	var usd string
	for _, term := range item.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			usd = dim.PricePerUnit["USD"]
		}
	}
	if usd != "12.2400000000" || item.Product.Attributes["gpu"] != "4" {
		t.Errorf("p3.8xlarge: USD %q, attributes %v", usd, item.Product.Attributes)
	}

	// Fewer filters, more products: the paginator walks them.
	var n int
	p := pricing.NewGetProductsPaginator(c.pricing, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		Filters: []ptypes.Filter{termMatch("instanceType", "p3.8xlarge")}, MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.PriceList)
	}
	if n != 6 {
		t.Errorf("%d products for p3.8xlarge in any region and OS, want 6", n)
	}
	if _, err := c.pricing.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonS3")}); apiCode(err) != "NotFoundException" {
		t.Errorf("another service: %v", err)
	}
}

func TestSpotPriceHistory(t *testing.T) {
	s, c := start(t, Config{})
	latest := func() map[string]string {
		out, err := c.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
			InstanceTypes: []types.InstanceType{types.InstanceTypeP38xlarge}, ProductDescriptions: []string{"Linux/UNIX"},
			StartTime: aws.Time(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		byAZ := map[string]string{}
		for _, h := range out.SpotPriceHistory { // newest first: keep the first per zone
			if _, ok := byAZ[aws.ToString(h.AvailabilityZone)]; !ok {
				byAZ[aws.ToString(h.AvailabilityZone)] = aws.ToString(h.SpotPrice)
			}
		}
		return byAZ
	}
	if got := latest(); got["us-east-1a"] != "3.680000" || got["us-east-1b"] != "3.680000" || len(got) != 2 {
		t.Errorf("spot prices %v, want the catalog's 3.68 in both zones", got)
	}
	if err := s.SetSpotPrice("p3.8xlarge", "us-east-1b", 4.1); err != nil {
		t.Fatal(err)
	}
	if got := latest(); got["us-east-1a"] != "3.680000" || got["us-east-1b"] != "4.100000" {
		t.Errorf("after a change in 1b: %v", got)
	}
	// The whole history, a page at a time.
	var n int
	p := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []types.InstanceType{types.InstanceTypeP38xlarge}, MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.SpotPriceHistory)
	}
	if n != 6 { // 2 zones x 2 products, and the change in 1b for both products
		t.Errorf("%d records, want 6", n)
	}
}

func TestDescribeInstanceTypes(t *testing.T) {
	_, c := start(t, Config{})
	out, err := c.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []types.InstanceType{types.InstanceTypeP38xlarge, types.InstanceTypeC5Large}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[types.InstanceType]types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		got[it.InstanceType] = it
	}
	p3 := got[types.InstanceTypeP38xlarge]
	if p3.GpuInfo == nil || aws.ToInt32(p3.GpuInfo.Gpus[0].Count) != 4 || aws.ToInt32(p3.VCpuInfo.DefaultVCpus) != 32 ||
		aws.ToString(p3.GpuInfo.Gpus[0].Manufacturer) != "NVIDIA" {
		t.Errorf("p3.8xlarge: %+v", p3)
	}
	if p3.NetworkInfo == nil || aws.ToString(p3.NetworkInfo.NetworkPerformance) != "10 Gigabit" {
		t.Errorf("p3.8xlarge network: %+v", p3.NetworkInfo)
	}
	if c5 := got[types.InstanceTypeC5Large]; c5.GpuInfo != nil || aws.ToInt32(c5.VCpuInfo.DefaultVCpus) != 2 {
		t.Errorf("c5.large: %+v", c5)
	}
	var n int
	p := ec2.NewDescribeInstanceTypesPaginator(c.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.InstanceTypes)
	}
	if n != len(DefaultInstanceTypes()) {
		t.Errorf("%d types paged, want %d", n, len(DefaultInstanceTypes()))
	}
	if _, err := c.ec2.DescribeInstanceTypes(t.Context(), &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []types.InstanceType{"p9.mega"}}); apiCode(err) != "InvalidInstanceType" {
		t.Errorf("unknown type: %v", err)
	}
}
