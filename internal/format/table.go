package format

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Table writes right-aligned columns, as the CLI's tables are.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with its header.
func NewTable(w io.Writer, cols ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t")+"\t")
	return t
}

// Row adds a row, each cell as fmt.Sprint writes it.
func (t *Table) Row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t")+"\t")
}

// Flush writes the table out.
func (t *Table) Flush() { t.tw.Flush() }

// Ago is how long before now t was, as `nomad job status` and `sky status` print it: 5s ago,
// 3m ago, 7h ago, and the date from two days on; - for no time.
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return t.Local().Format("2006-01-02")
	}
}

// Shorten is s on one line, cut to n runes with an ellipsis.
func Shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
