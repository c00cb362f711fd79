package ec2

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Refresh is what RefreshCatalog read: the catalog file to write, and the GPU types it left out
// with why (no Linux on-demand price: Capacity Blocks only; a row a spec could not use).
type Refresh struct {
	File    *spec.CatalogFile
	Skipped []string
}

// RefreshCatalog reads region's GPU instance types (those DescribeInstanceTypes gives GpuInfo)
// with their GPUs, GPU memory, vCPUs, memory and network, and prices each from the Price List
// API as Prices does (Linux, shared tenancy, no pre-installed software): a local catalog as of
// now. A failed call fails it: a catalog that silently lacks types would pass for complete. A
// cfg without a retryer gets Prices' quick one.
func RefreshCatalog(ctx context.Context, cfg aws.Config, region string, now time.Time) (*Refresh, error) {
	if region == "" {
		return nil, errors.New("ec2: catalog refresh: no region")
	}
	if cfg.Retryer == nil {
		cfg.Retryer = quickRetryer
	}
	rows, err := gpuInstanceTypes(ctx, ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.Region = region }))
	if err != nil {
		return nil, fmt.Errorf("ec2: catalog refresh: DescribeInstanceTypes in %s: %w", region, err)
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	prices := onDemandPrices(ctx, pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = pricingRegion }), region, names)
	source := fmt.Sprintf("DescribeInstanceTypes + Pricing API, %s, fetched %s", region, now.UTC().Format(time.RFC3339))
	out := &Refresh{File: &spec.CatalogFile{Version: spec.CatalogFileVersion, Region: region, FetchedAt: now.UTC()}}
	for _, r := range rows {
		a := prices[r.Name]
		if a.failed {
			return nil, fmt.Errorf("ec2: catalog refresh: %s", a.why)
		}
		if len(a.prices) == 0 {
			out.Skipped = append(out.Skipped, r.Name+": "+a.why)
			continue
		}
		r.PricePerHour, r.Source = a.prices[0].PerHour, source
		if err := spec.CheckInstanceType(r); err != nil {
			out.Skipped = append(out.Skipped, err.Error())
			continue
		}
		out.File.InstanceTypes = append(out.File.InstanceTypes, r)
	}
	return out, nil
}

// gpuInstanceTypes lists the types with GPUs, their price not yet known, sorted by name.
func gpuInstanceTypes(ctx context.Context, c *ec2.Client) ([]spec.InstanceType, error) {
	var out []spec.InstanceType
	pages := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, info := range page.InstanceTypes {
			if r, ok := gpuRow(info); ok {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b spec.InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// gpuRow is an instance type's catalog row, false for one without GPUs. GPU memory is per GPU,
// as AWS reports it (a little below the card's nominal size: 22 GiB for an A10G's 24 GB).
func gpuRow(info ec2types.InstanceTypeInfo) (spec.InstanceType, bool) {
	if info.GpuInfo == nil {
		return spec.InstanceType{}, false
	}
	r := spec.InstanceType{Name: string(info.InstanceType)}
	var models []string
	for _, g := range info.GpuInfo.Gpus {
		n := int(aws.ToInt32(g.Count))
		if n <= 0 {
			continue
		}
		r.GPUs += n
		if m := aws.ToString(g.Name); m != "" && !slices.Contains(models, m) {
			models = append(models, m)
		}
		if g.MemoryInfo != nil && r.GPUMemoryGiB == 0 {
			r.GPUMemoryGiB = float64(aws.ToInt32(g.MemoryInfo.SizeInMiB)) / 1024
		}
	}
	if r.GPUs == 0 {
		return spec.InstanceType{}, false
	}
	r.GPUModel = strings.Join(models, "+")
	if info.VCpuInfo != nil {
		r.VCPUs = int(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		r.MemoryGiB = float64(aws.ToInt64(info.MemoryInfo.SizeInMiB)) / 1024
	}
	r.NetworkGbps = networkGbps(info.NetworkInfo)
	return r, true
}

// networkRE reads DescribeInstanceTypes' network performance: "25 Gigabit", "Up to 10
// Gigabit", "4x 100 Gigabit", "12500 Megabit". Words alone ("Moderate", "High") give no figure.
var networkRE = regexp.MustCompile(`^(?i)(?:up to\s+)?(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s+(gigabit|megabit)$`)

// networkGbps is a type's bandwidth ("up to" taken at its cap, as the built-in catalog does):
// from its network performance, else the sum of its network cards' peaks, else 0 (unknown).
func networkGbps(n *ec2types.NetworkInfo) float64 {
	if n == nil {
		return 0
	}
	if m := networkRE.FindStringSubmatch(strings.TrimSpace(aws.ToString(n.NetworkPerformance))); m != nil {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] != "" {
			k, _ := strconv.Atoi(m[1])
			v *= float64(k)
		}
		if strings.EqualFold(m[3], "megabit") {
			v /= 1000
		}
		return v
	}
	var sum float64
	for _, card := range n.NetworkCards {
		sum += aws.ToFloat64(card.PeakBandwidthInGbps)
	}
	return sum
}
