package format

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Money formats dollars: cents from $1 up, four decimals below (see the package comment).
func Money(usd float64) string {
	if s, ok := notFinite(usd); ok {
		return s
	}
	switch {
	case usd < 0:
		return "-" + Money(-usd)
	case usd < 1:
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// Clock formats seconds as 12.3s, m:ss or h:mm:ss; an infinite duration is ∞, an unknown one -.
func Clock(s float64) string {
	if f, ok := notFinite(s); ok {
		return f
	}
	if math.Abs(s) < 60 {
		return fmt.Sprintf("%.1fs", s)
	}
	sign := ""
	if s < 0 {
		sign, s = "-", -s
	}
	t := int(math.Round(s))
	if t >= 3600 {
		return fmt.Sprintf("%s%d:%02d:%02d", sign, t/3600, t/60%60, t%60)
	}
	return fmt.Sprintf("%s%d:%02d", sign, t/60, t%60)
}

// notFinite writes an unknown number as -, an infinite one as ∞.
func notFinite(x float64) (string, bool) {
	switch {
	case math.IsNaN(x):
		return "-", true
	case math.IsInf(x, 0):
		return "∞", true
	}
	return "", false
}

// Plural is n and the word, with an s unless n is 1: "1 node", "3 nodes", "0 GPUs".
func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Pct is how far real is from pred, in percent of pred (0 when pred is 0).
func Pct(real, pred float64) float64 {
	if pred == 0 {
		return 0
	}
	return 100 * (real - pred) / pred
}

// JSON writes v as every command and the server write JSON: indented by two spaces, one
// document and a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
