// Package palette holds the colours every picture of a run shares, so that predicted and
// realized look the same in the dashboard (SVG) and in report's charts (PNG): a reader who
// learned one need not learn the other.
package palette

import (
	"fmt"
	"image/color"
)

// The two colours of every predicted-beside-realized picture: a prediction is blue, what
// happened red (the deadline and interruptions are marked in red too: what happened).
const (
	Predicted = "#1f77b4"
	Realized  = "#d62728"
)

// Series are the colours of series that are neither, in order (matplotlib's tab10, which the
// two above come from).
var Series = [...]string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// RGBA is a "#rrggbb" colour as image/color's, for the charts drawn as images; a malformed one
// is black.
func RGBA(hex string) color.NRGBA {
	var r, g, b uint8
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return color.NRGBA{A: 255}
	}
	return color.NRGBA{R: r, G: g, B: b, A: 255}
}
