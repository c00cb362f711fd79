package spec

import (
	"fmt"
	"io"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// WriteCatalog writes rows (EffectiveCatalog's) as `rubberband catalog` shows them: the local
// catalog file f (read from path) first when there is one, then a row per instance type with
// where it comes from, and where the built-in prices come from.
func WriteCatalog(w io.Writer, path string, f *CatalogFile, rows []CatalogRow) {
	if f != nil {
		fmt.Fprintf(w, "local catalog %s: %s in %s, fetched %s\n", path, format.Plural(len(f.InstanceTypes), "type"), f.Region,
			f.FetchedAt.Format(time.RFC3339))
	}
	t := format.NewTable(w, "TYPE", "GPUS", "GPU", "GPU MEM", "VCPUS", "MEMORY", "NETWORK", "$/HOUR", "ORIGIN")
	for _, r := range rows {
		t.Row(r.Name, r.GPUs, r.GPUModel, orDash(r.GPUMemoryGiB, "%g GiB"), orDash(float64(r.VCPUs), "%g"), orDash(r.MemoryGiB, "%g GiB"),
			orDash(r.NetworkGbps, "%g Gb/s"), fmt.Sprintf("%.4f", r.PricePerHour), r.Origin)
	}
	t.Flush()
	fmt.Fprintln(w, "built-in prices are us-east-1's on-demand, all from AWS's price list of one date (2026-08); `rubberband catalog -o json` gives each row's source, `rubberband prices TYPE` today's price")
}

// orDash is v in layout, or "-" for a figure the catalog does not have.
func orDash(v float64, layout string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(layout, v)
}
