package runstate

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
)

// DeadlineWarning says how a forecast of the whole run misses the deadline (spec seconds) at
// the quantile it is planned for: "" when it meets it (or there is none). What the terminal,
// the driver log, `status` and the dashboard say of a run at risk.
func DeadlineWarning(f *planner.Forecast, deadline, quantile float64) string {
	if f == nil || deadline <= 0 || f.MissProb <= 1-quantile+1e-9 {
		return ""
	}
	return fmt.Sprintf("the forecast misses the deadline %s: JCT %s, P(miss) %.0f%% (at most %.0f%% allowed)",
		format.Clock(deadline), format.Clock(f.JCT), 100*f.MissProb, 100*(1-quantile))
}
