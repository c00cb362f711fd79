package driver

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Refreshed is what `catalog refresh` wrote (its -o json): where, of which region, how many
// instance types, and the ones left out and why.
type Refreshed struct {
	Path    string   `json:"path"`
	Region  string   `json:"region"`
	Types   int      `json:"types"`
	Skipped []string `json:"skipped"`
}

// RefreshCatalog reads cfg's region's GPU instance types and prices from AWS
// (ec2.RefreshCatalog) into the local catalog file at path.
func RefreshCatalog(ctx context.Context, cfg aws.Config, path string, now time.Time) (*Refreshed, error) {
	r, err := ec2.RefreshCatalog(ctx, cfg, cfg.Region, now)
	if err != nil {
		return nil, err
	}
	if err := spec.WriteCatalogFile(path, r.File); err != nil {
		return nil, fmt.Errorf("catalog refresh: %w", err)
	}
	return &Refreshed{Path: path, Region: r.File.Region, Types: len(r.File.InstanceTypes), Skipped: append([]string{}, r.Skipped...)}, nil
}

// WriteText says in words what was written and what was left out.
func (r *Refreshed) WriteText(w io.Writer) {
	fmt.Fprintf(w, "wrote %s: %s with GPUs in %s\n", r.Path, format.Plural(r.Types, "instance type"), r.Region)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "left out %s\n", s)
	}
}

// PriceList is `prices -o json`: prices are per region, so the region is said.
type PriceList struct {
	Region string      `json:"region"`
	Prices []ec2.Price `json:"prices"`
}

// WriteTable writes the list as WritePrices does.
func (l PriceList) WriteTable(w io.Writer) { WritePrices(w, l.Region, l.Prices) }

// MarketOf is `prices --market`: on-demand, spot, or all ("", both); another matches ErrInput.
func MarketOf(m string) (cloud.Market, error) {
	switch m {
	case "all":
		return "", nil
	case string(cloud.OnDemand), string(cloud.Spot):
		return cloud.Market(m), nil
	}
	return "", inputErr("--market %q is not a market (on-demand, spot or all)", m)
}
