package charts

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/palette"
)

func checkPNG(t *testing.T, file string) image.Config {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" {
		t.Fatalf("%s: not a PNG (%v)", file, err)
	}
	return cfg
}

func TestCharts(t *testing.T) {
	dir := t.TempDir()
	band := filepath.Join(dir, "band.png")
	if err := Band(band, "t", "x", "y", []Series{{Name: "a", X: []float64{1, 2, 3}, P50: []float64{3, 2, 1}, Lo: []float64{2, 1, 0.5}, Hi: []float64{4, 3, 2}}}, nil); err != nil {
		t.Fatal(err)
	}
	if cfg := checkPNG(t, band); cfg.Width != int(Width.Dots(96)) || cfg.Height != int(Height.Dots(96)) {
		t.Fatalf("band chart %dx%d", cfg.Width, cfg.Height)
	}
	svg := filepath.Join(dir, "gantt.svg")
	bars := []Bar{{Row: 0, Start: 0, End: 30, Kind: "provision"}, {Row: 0, Start: 30, End: 90, Kind: "train", Label: 1},
		{Row: 1, Start: 30, End: 80, Kind: "train", Label: 2}, {Row: 1, Start: 90, End: 200, Kind: "train", Label: 3}}
	n, err := Gantt(svg, "schedule", 2, bars, []float64{90, 200})
	if err != nil || n != 3 {
		t.Fatalf("gantt drew %d TRAIN bars (want 3): %v", n, err)
	}
	b, _ := os.ReadFile(svg)
	// Every bar is a filled path; the SVG holds at least the four bars and the two legend swatches.
	if !strings.HasPrefix(strings.TrimSpace(string(b)), "<?xml") || !strings.Contains(string(b), "<svg") || strings.Count(string(b), "<path") < 6 {
		t.Fatalf("not the expected SVG (%d paths)", strings.Count(string(b), "<path"))
	}
	// Interruptions and re-plans are marked, each kind once in the legend.
	marked := filepath.Join(dir, "marked.svg")
	if _, err := Gantt(marked, "schedule", 2, bars, []float64{90, 200}, Mark{At: 60, Kind: MarkInterruption}, Mark{At: 95, Kind: MarkReplan},
		Mark{At: 120, Kind: MarkInterruption}); err != nil {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(marked)
	if strings.Count(string(m), ">spot interruption<") != 1 || strings.Count(string(m), ">re-plan<") != 1 || strings.Count(string(m), "<path") < strings.Count(string(b), "<path")+3 {
		t.Fatalf("marks not drawn: %d paths against %d unmarked", strings.Count(string(m), "<path"), strings.Count(string(b), "<path"))
	}
	hist := filepath.Join(dir, "hist.png")
	if err := Histogram(hist, "h", "x", []float64{1, 2, 2, 3, 3, 3}, 2.5, "deadline"); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, hist)
	if err := Histogram(filepath.Join(dir, "h.jpg"), "h", "x", []float64{1}, 0, ""); err == nil {
		t.Fatal("a .jpg was accepted")
	}
}

// A sweep's values are placed on the x axis as minutes (durations), as numbers, or else in
// order with their labels.
func TestSweepAxis(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		xs      []float64
		unit    string
		numeric bool
	}{
		{[]string{"10m", "90s", "1h"}, []float64{10, 1.5, 60}, " (minutes)", true},
		{[]string{"0.5", "2", "8"}, []float64{0.5, 2, 8}, "", true},
		{[]string{"per-instance", "per-function"}, []float64{0, 1}, "", false},
		{[]string{"10m", "3"}, []float64{0, 1}, "", false},
	} {
		xs, unit, numeric := sweepAxis(tc.values)
		if fmt.Sprint(xs) != fmt.Sprint(tc.xs) || unit != tc.unit || numeric != tc.numeric {
			t.Errorf("%v: %v %q %v", tc.values, xs, unit, numeric)
		}
	}
}

// Predicted and realized bars are drawn in the colours the dashboard gives them (package
// palette): before, the PNG's predicted was the dashboard's realized colour and back.
func TestPairedColoursAreTheDashboards(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cost.png")
	if err := Paired(file, "cost per stage", "cost", []string{"1", "2"}, []float64{3, 2}, []float64{0, 0}, "predicted", "realized"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := palette.RGBA(palette.Predicted)
	found := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if color.NRGBAModel.Convert(img.At(x, y)) == want {
				found++
			}
		}
	}
	if found < 100 {
		t.Errorf("%d pixels of the predicted colour %s: the bars are drawn in another", found, palette.Predicted)
	}
}
