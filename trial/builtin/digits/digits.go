// Package digits holds the UCI handwritten digits (README.md: source and licence), embedded so
// that the example trainers need no download.
package digits

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/csv"
	"fmt"
	"strconv"
)

//go:embed digits.csv.gz
var digitsGz []byte

// Digits returns the 1,797 images as 64 pixel values in [0, 1] and their labels 0-9.
func Digits() (x [][]float64, y []int, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(digitsGz))
	if err != nil {
		return nil, nil, fmt.Errorf("digits: %w", err)
	}
	rows, err := csv.NewReader(zr).ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("digits: %w", err)
	}
	for i, row := range rows {
		if len(row) != 65 {
			return nil, nil, fmt.Errorf("digits: row %d has %d columns", i, len(row))
		}
		px := make([]float64, 64)
		for j := range px {
			v, err := strconv.Atoi(row[j])
			if err != nil {
				return nil, nil, fmt.Errorf("digits: row %d: %w", i, err)
			}
			px[j] = float64(v) / 16
		}
		label, err := strconv.Atoi(row[64])
		if err != nil || label < 0 || label > 9 {
			return nil, nil, fmt.Errorf("digits: row %d: bad label %q", i, row[64])
		}
		x, y = append(x, px), append(y, label)
	}
	return x, y, nil
}
