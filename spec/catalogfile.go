package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// CatalogFileVersion is the version of the local catalog file format CatalogFile writes.
const CatalogFileVersion = 1

// MaxCatalogFileSize bounds a local catalog file: a refresh of one region's GPU types is some
// 50 KiB, and a wrong path must be refused before it is read into memory.
const MaxCatalogFileSize = 4 << 20

// MaxCatalogTypes bounds the rows of a local catalog file (AWS sells a few hundred types in all).
const MaxCatalogTypes = 10_000

// CatalogFile is a local catalog file: instance types refreshed from a cloud's APIs, which
// validate, plan and prices use beside the built-in catalog (a row of the same name replaces the
// built-in one).
type CatalogFile struct {
	Version int    `json:"version"`
	Region  string `json:"region"`
	// FetchedAt is when the figures were read.
	FetchedAt     time.Time      `json:"fetched_at"`
	InstanceTypes []InstanceType `json:"instance_types"`
}

var instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)

// IsInstanceTypeName says whether name has the shape of an instance type's name ("g5.xlarge"):
// what a catalog row and a price query may name.
func IsInstanceTypeName(name string) bool { return instanceTypeRE.MatchString(name) }

// ParseCatalogFile decodes and checks a local catalog file's bytes; name is the file's, for
// errors. Unknown fields are refused: a misspelt price must not pass unnoticed.
func ParseCatalogFile(name string, data []byte) (*CatalogFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f CatalogFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("catalog file %s: not a catalog (JSON): %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("catalog file %s: text after the catalog's JSON object", name)
	}
	if f.Version != CatalogFileVersion {
		return nil, fmt.Errorf("catalog file %s: version %d is not %d (write it again with `rubberband catalog refresh`)", name, f.Version, CatalogFileVersion)
	}
	if len(f.InstanceTypes) > MaxCatalogTypes {
		return nil, fmt.Errorf("catalog file %s: %d instance types, above the limit of %d", name, len(f.InstanceTypes), MaxCatalogTypes)
	}
	var errs []error
	seen := map[string]bool{}
	for i, it := range f.InstanceTypes {
		if err := CheckInstanceType(it); err != nil {
			errs = append(errs, fmt.Errorf("instance_types[%d]: %w", i, err))
		} else if seen[it.Name] {
			errs = append(errs, fmt.Errorf("instance_types[%d]: %q is listed twice", i, it.Name))
		}
		seen[it.Name] = true
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("catalog file %s: %w", name, errors.Join(errs...))
	}
	slices.SortFunc(f.InstanceTypes, func(a, b InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return &f, nil
}

// CheckInstanceType says what is wrong with a catalog row, naming it: the bounds are a spec's
// own, so that a row fills no field with a value the spec would refuse.
func CheckInstanceType(it InstanceType) error {
	if msg := rowProblem(it); msg != "" {
		return fmt.Errorf("%q: %s", it.Name, msg)
	}
	return nil
}

func rowProblem(it InstanceType) string {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !IsInstanceTypeName(it.Name) || len(it.Name) > MaxNameLen:
		return "the name is not an instance type's (such as g5.xlarge)"
	case it.GPUs < 1 || it.GPUs > 1024:
		return fmt.Sprintf("gpus %d is out of range (1 to 1024)", it.GPUs)
	case it.GPUModel == "" || len(it.GPUModel) > MaxNameLen:
		return "gpu_model is required (at most " + fmt.Sprint(MaxNameLen) + " bytes)"
	case !(it.PricePerHour > 0) || it.PricePerHour > MaxPricePerHour:
		return fmt.Sprintf("price_per_hour %v is out of range (above 0, at most %d dollars)", it.PricePerHour, MaxPricePerHour)
	case !finite(it.SpotPricePerHour) || it.SpotPricePerHour < 0 || it.SpotPricePerHour > MaxPricePerHour:
		return fmt.Sprintf("spot_price_per_hour %v is out of range (0 to %d dollars)", it.SpotPricePerHour, MaxPricePerHour)
	case !finite(it.NetworkGbps) || it.NetworkGbps < 0 || it.NetworkGbps > MaxNetworkGbps || it.NetworkGbps > 0 && it.NetworkGbps < MinNetworkGbps:
		return fmt.Sprintf("network_gbps %v is out of range (0 when unknown, or %v to %d)", it.NetworkGbps, MinNetworkGbps, MaxNetworkGbps)
	case !finite(it.GPUMemoryGiB) || it.GPUMemoryGiB < 0 || !finite(it.MemoryGiB) || it.MemoryGiB < 0 || it.VCPUs < 0:
		return "gpu_memory_gib, memory_gib and vcpus must not be negative"
	case it.Source == "":
		return "source is required: where the figures come from"
	}
	return ""
}

// ReadCatalogFile reads and checks the local catalog file at path, of at most
// MaxCatalogFileSize bytes.
func ReadCatalogFile(path string) (*CatalogFile, error) {
	data, err := safefile.Read(path, MaxCatalogFileSize, "a catalog file")
	if err != nil {
		return nil, fmt.Errorf("catalog file: %w", err)
	}
	return ParseCatalogFile(path, data)
}

// Encode is the file's text, rows sorted by name, ending in a newline.
func (f *CatalogFile) Encode() ([]byte, error) {
	out := *f
	out.InstanceTypes = slices.Clone(f.InstanceTypes)
	slices.SortFunc(out.InstanceTypes, func(a, b InstanceType) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	return append(b, '\n'), nil
}

// Catalog is the built-in catalog with the file's rows over it.
func (f *CatalogFile) Catalog() InstanceCatalog {
	return BuiltinCatalog().WithOverrides(f.InstanceTypes)
}

// WriteCatalogFile writes f to path atomically, mode 0600, making its directory first: what
// `catalog refresh` writes and a run keeps of the catalog it started with.
func WriteCatalogFile(path string, f *CatalogFile) error {
	data, err := f.Encode()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write catalog file: %w", err)
	}
	if err := safefile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("write catalog file: %w", err)
	}
	return nil
}

// CatalogRow is a row of the effective catalog and where it comes from.
type CatalogRow struct {
	InstanceType
	Origin string `json:"origin"`
}

// Where a catalog row comes from.
const (
	OriginBuiltin = "built-in"
	OriginLocal   = "local"
)

// EffectiveCatalog is the built-in catalog with f's rows over it (f nil: the built-in one
// alone), each row marked with its origin.
func EffectiveCatalog(f *CatalogFile) []CatalogRow {
	cat, local := BuiltinCatalog(), map[string]bool{}
	if f != nil {
		cat = f.Catalog()
		for _, it := range f.InstanceTypes {
			local[it.Name] = true
		}
	}
	rows := make([]CatalogRow, len(cat))
	for i, it := range cat {
		rows[i] = CatalogRow{InstanceType: it, Origin: OriginBuiltin}
		if local[it.Name] {
			rows[i].Origin = OriginLocal
		}
	}
	return rows
}
