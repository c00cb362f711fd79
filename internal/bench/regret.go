package bench

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/internal/charts"
)

// Regret draws each sampler's median regret with its quartile band against GPU dollars:
// every iteration costs the same here, so iterations convert at the runs' mean price of one.
func Regret(file string, r Result, trajs []Trajectory) error {
	var dollars, iters float64
	for _, t := range trajs {
		if n := len(t.Points); n > 0 && t.Points[n-1].Dollars == t.Points[n-1].Dollars { // not NaN: ours
			dollars += t.Points[n-1].Dollars
			iters += t.Points[n-1].Iters
		}
	}
	perIter := dollars / iters
	var series []charts.Series
	for _, s := range r.Summaries {
		sr := charts.Series{Name: s.Sampler, Legend: "(median, quartiles)"}
		for i, x := range s.Iters {
			if s.P75[i] > 1e300 { // no result yet in a quarter of the runs
				continue
			}
			sr.X = append(sr.X, x*perIter)
			sr.P50, sr.Lo, sr.Hi = append(sr.P50, s.P50[i]), append(sr.Lo, s.P25[i]), append(sr.Hi, s.P75[i])
		}
		series = append(series, sr)
	}
	title, xLabel := r.Case+": regret by GPU dollars spent", fmt.Sprintf("GPU dollars spent ($%.4f an iteration)", perIter)
	if r.MaxHypervolume > 0 { // fronts' regrets span decades: the ends differ where a linear axis shows nothing
		return charts.BandLogY(file, title, xLabel, "hypervolume regret (true front's minus found), log scale", series)
	}
	return charts.Band(file, title, xLabel, r.Measure(), series, nil)
}
