package e2e

import (
	"fmt"
	"os"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

// Fidelity is measured, not timed: the benchmarks named BenchmarkFidelity* run real processes
// (local, Nomad, the EC2 wire fake) at compressed time and hold realized against predicted,
// which a loaded machine skews, so `make test` leaves them to `make fidelity`, which prints each
// one's figures as a table. `make test` keeps one short real run per backend that asserts
// behaviour, and holds the same claims in virtual time.

// fidelityCols are a realized-against-predicted table's columns, one row a run.
var fidelityCols = []string{"SEED", "PRED JCT", "JCT", "ΔJCT", "PRED COST", "COST", "ΔCOST"}

// fidelityTable starts a table of figures on standard output under its title.
func fidelityTable(title string, cols ...string) *format.Table {
	fmt.Printf("\n%s\n", title)
	return format.NewTable(os.Stdout, cols...)
}

// fidelityRow adds a run's realized against predicted JCT and cost to tab, extra cells after
// them, and returns the two differences in percent.
func fidelityRow(tab *format.Table, seed string, r runstate.Report, extra ...any) (dJCT, dCost float64) {
	dJCT, dCost = format.Pct(r.Realized.JCT, r.Predicted.JCT), format.Pct(r.Realized.Cost, r.Predicted.Cost)
	tab.Row(append([]any{seed, format.Clock(r.Predicted.JCT), format.Clock(r.Realized.JCT), fmt.Sprintf("%+.1f%%", dJCT),
		fmt.Sprintf("$%.4f", r.Predicted.Cost), fmt.Sprintf("$%.4f", r.Realized.Cost), fmt.Sprintf("%+.1f%%", dCost)}, extra...)...)
	return dJCT, dCost
}
