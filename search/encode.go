package search

import (
	"math"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Configurations are modelled as points of the unit cube, one coordinate per parameter in
// spec.ParamOrder: uniform and int ranges scaled to [0, 1] (an int's values as equal cells),
// loguniform in log space, a choice as the index of its value. An inactive parameter is NaN.

// dim is how one parameter maps to a coordinate.
type dim struct {
	name   string
	param  spec.Param
	levels int // a choice's values; 0 for the numeric
	// A loguniform's log(min) and log(max/min), worked out once: encoding reads thousands.
	logMin, logSpan float64
}

func dims(space map[string]spec.Param) []dim {
	names := spec.ParamOrder(space)
	out := make([]dim, len(names))
	for i, n := range names {
		p := space[n]
		out[i] = dim{name: n, param: p}
		switch p.Type {
		case "choice":
			out[i].levels = len(p.Values)
		case "loguniform":
			out[i].logMin, out[i].logSpan = math.Log(p.Min), math.Log(p.Max)-math.Log(p.Min)
		}
	}
	return out
}

// Decode turns a point of the unit cube (coordinates in ParamOrder) into a configuration, its
// inactive parameters dropped. A choice's coordinate picks the value of its cell.
func Decode(space map[string]spec.Param, u []float64) spec.Config {
	return decode(dims(space), space, u)
}

func decode(ds []dim, space map[string]spec.Param, u []float64) spec.Config {
	c := make(spec.Config, len(ds))
	for i, d := range ds {
		x := min(max(u[i], 0), math.Nextafter(1, 0))
		p := d.param
		switch p.Type {
		case "uniform":
			c[d.name] = p.Min + x*(p.Max-p.Min)
		case "loguniform":
			lo, hi := math.Log(p.Min), math.Log(p.Max)
			c[d.name] = math.Exp(lo + x*(hi-lo))
		case "int":
			lo, hi := int64(p.Min), int64(p.Max)
			c[d.name] = min(lo+int64(x*float64(hi-lo+1)), hi)
		default:
			c[d.name] = p.Values[min(int(x*float64(len(p.Values))), len(p.Values)-1)]
		}
	}
	return spec.Prune(space, c)
}

// encode is the inverse of decode: a choice becomes its value's index (not a cell), the numeric
// their scaled value (an int the middle of its cell); absent parameters NaN.
func encode(ds []dim, c spec.Config) []float64 {
	u := make([]float64, len(ds))
	for i := range u {
		u[i] = math.NaN()
	}
	for i := range ds {
		if v, ok := c[ds[i].name]; ok {
			u[i] = encodeValue(&ds[i], v)
		}
	}
	return u
}

// encodeIndexed is encode into u for a space whose coordinates index names: it ranges over c rather
// than looking each parameter up, since a history's configurations are scattered in memory and
// a draw reads thousands of them.
func encodeIndexed(u []float64, ds []dim, index map[string]int, c spec.Config) {
	for i := range u {
		u[i] = math.NaN()
	}
	for name, v := range c {
		if i, ok := index[name]; ok {
			u[i] = encodeValue(&ds[i], v)
		}
	}
}

// encodeValue is one parameter's coordinate (NaN where v is none of its values).
func encodeValue(d *dim, v any) float64 {
	x := math.NaN()
	p := &d.param
	switch p.Type {
	case "choice":
		for k, w := range p.Values {
			if spec.SameValue(v, w) {
				return float64(k)
			}
		}
	case "uniform":
		if f, ok := Number(v); ok {
			x = (f - p.Min) / (p.Max - p.Min)
		}
	case "loguniform":
		if f, ok := Number(v); ok && f > 0 {
			x = (math.Log(f) - d.logMin) / d.logSpan
		}
	case "int":
		if f, ok := Number(v); ok {
			x = (f - p.Min + 0.5) / (p.Max - p.Min + 1)
		}
	}
	if d.levels == 0 && !math.IsNaN(x) {
		x = min(max(x, 0), 1) // a result from another space may lie outside this one
	}
	return x
}

// Number reads a parameter's number however a journal or a spec holds it (float64, int64, int).
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	}
	return 0, false
}

// AxisValue places a parameter's value on a chart's axis: a choice's index among its values,
// a number as it is.
func AxisValue(p spec.Param, v any) (float64, bool) {
	if p.Type == "choice" {
		for i, w := range p.Values {
			if spec.SameValue(v, w) {
				return float64(i), true
			}
		}
		return 0, false
	}
	return Number(v)
}
