package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// table writes right-aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, cols ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t")+"\t")
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t")+"\t")
}

func (t *table) flush() { t.tw.Flush() }
