package driver

import (
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

// WritePrices writes `rubberband prices`' table of a region's prices, then a line for each
// price that is not AWS's saying why.
func WritePrices(w io.Writer, region string, ps []ec2.Price) {
	fmt.Fprintf(w, "region %s\n", region)
	t := format.NewTable(w, "TYPE", "MARKET", "ZONE", "$/HOUR", "SOURCE")
	for _, p := range ps {
		zone := p.Zone
		if zone == "" {
			zone = "-"
		}
		t.Row(p.InstanceType, p.Market, zone, fmt.Sprintf("%.4f", p.PerHour), p.Source)
	}
	t.Flush()
	for _, p := range ps {
		if p.Note != "" {
			fmt.Fprintf(w, "note: %s %s from the catalog: %s\n", p.InstanceType, p.Market, p.Note)
		}
	}
}
