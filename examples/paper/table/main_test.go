package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Every example spec in the repository is valid.
func TestExamplesValidate(t *testing.T) {
	files, _ := filepath.Glob("../../*.yaml")
	more, _ := filepath.Glob("../*.yaml")
	files = append(files, more...)
	if len(files) < 8 {
		t.Fatalf("found only %d example specs", len(files))
	}
	for _, f := range files {
		if _, err := spec.Load(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// A row of the paper table has a cell per planner, and the costs it prints keep the planners'
// order: optimal <= greedy <= static.
func TestTableRow(t *testing.T) {
	for _, s := range settings() {
		if s.label != "Table 2, 30 min" && s.label != "Fig. 12, init 10 s, 90 min" {
			continue
		}
		row, err := run(filepath.Join("..", s.file), s)
		if err != nil {
			t.Fatal(err)
		}
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 7 {
			t.Fatalf("%d cells: %s", len(cells), row)
		}
		cost := func(cell string) float64 {
			m := regexp.MustCompile(`^\$([0-9.]+), `).FindStringSubmatch(cell)
			if m == nil {
				t.Fatalf("cell %q has no cost", cell)
			}
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
		if st, gr, op := cost(cells[1]), cost(cells[3]), cost(cells[4]); op > gr || gr > st {
			t.Fatalf("%s: static %v greedy %v optimal %v", s.label, st, gr, op)
		}
	}
	if _, err := os.Stat("../table2-resnet101.yaml"); err != nil {
		t.Fatal(err)
	}
}
