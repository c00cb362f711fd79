package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Sweep is one dimension of a what-if grid: a spec field by its path and the values it takes.
type Sweep struct {
	Name   string
	Values []string
}

// Sweep names that act on the whole profile rather than one field.
const (
	// IterLatencyScale multiplies every iteration latency of the profile.
	IterLatencyScale = "profile.iter_latency"
	// IterLatencyStd sets the standard deviation of one iteration on one GPU, and at every
	// other GPU count in proportion to its mean (the paper's straggler sweep, Fig. 9).
	IterLatencyStd = "profile.iter_latency.std"
)

// ParseSweep reads NAME=VALUES, where VALUES is a list (1s,10s,100s) or a range FROM..TO/STEP of
// numbers or Go durations (10m..60m/5m); a range holds both ends when the steps reach TO.
func ParseSweep(s string) (Sweep, error) {
	name, values, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(values) == "" {
		return Sweep{}, fmt.Errorf("sweep %q: want NAME=VALUES (a list a,b,c or a range from..to/step)", s)
	}
	sw := Sweep{Name: name}
	if from, rest, isRange := strings.Cut(values, ".."); isRange {
		to, step, hasStep := strings.Cut(rest, "/")
		if !hasStep {
			return Sweep{}, fmt.Errorf("sweep %s: range %q needs a step (from..to/step)", name, values)
		}
		vals, err := expandRange(strings.TrimSpace(from), strings.TrimSpace(to), strings.TrimSpace(step))
		if err != nil {
			return Sweep{}, fmt.Errorf("sweep %s: %w", name, err)
		}
		sw.Values = vals
		return sw, nil
	}
	for _, v := range strings.Split(values, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return Sweep{}, fmt.Errorf("sweep %s: empty value in %q", name, values)
		}
		sw.Values = append(sw.Values, v)
	}
	return sw, nil
}

// maxSweepValues bounds one dimension, so that a typo cannot ask for a billion points.
const maxSweepValues = 10000

func expandRange(from, to, step string) ([]string, error) {
	if f, e1 := strconv.ParseFloat(from, 64); e1 == nil {
		t, e2 := strconv.ParseFloat(to, 64)
		s, e3 := strconv.ParseFloat(step, 64)
		if e2 != nil || e3 != nil {
			return nil, fmt.Errorf("range %s..%s/%s mixes numbers and other things", from, to, step)
		}
		return steps(f, t, s, func(x float64) string { return strconv.FormatFloat(x, 'g', 10, 64) })
	}
	f, e1 := time.ParseDuration(from)
	t, e2 := time.ParseDuration(to)
	s, e3 := time.ParseDuration(step)
	if e1 != nil || e2 != nil || e3 != nil {
		return nil, fmt.Errorf("range %s..%s/%s: ends and step must be numbers or Go durations (10m..60m/5m)", from, to, step)
	}
	return steps(f.Seconds(), t.Seconds(), s.Seconds(), func(x float64) string {
		return time.Duration(math.Round(x * float64(time.Second))).String()
	})
}

func steps(from, to, step float64, format func(float64) string) ([]string, error) {
	if !(step > 0) || to < from {
		return nil, fmt.Errorf("range needs from <= to and a step above 0")
	}
	n := int(math.Floor((to-from)/step+1e-9)) + 1
	if n > maxSweepValues {
		return nil, fmt.Errorf("range holds %d values (at most %d)", n, maxSweepValues)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = format(from + float64(i)*step)
	}
	return out, nil
}

// Point is one grid point: a value for every sweep, in sweep order.
type Point []string

// Grid is every combination of the sweeps' values, the first sweep varying slowest.
func Grid(sweeps []Sweep) []Point {
	points := []Point{{}}
	for _, sw := range sweeps {
		var next []Point
		for _, p := range points {
			for _, v := range sw.Values {
				next = append(next, append(append(Point(nil), p...), v))
			}
		}
		points = next
	}
	return points
}

// ApplyPoint parses a spec with the point's values written into it at their paths, as if the
// user had written them, so that they are decoded and validated like the rest. The
// profile.iter_latency sweep is a factor applied to every iteration latency after loading.
func ApplyPoint(file string, data []byte, read ReadFunc, sweeps []Sweep, p Point) (*Experiment, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: not a YAML document", file)
	}
	scale, std := 1.0, -1.0
	for i, sw := range sweeps {
		if sw.Name == IterLatencyStd {
			v, err := strconv.ParseFloat(p[i], 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("sweep %s: %q is not a number of seconds at least 0", sw.Name, p[i])
			}
			std = v
			continue
		}
		if sw.Name == IterLatencyScale {
			f, err := strconv.ParseFloat(p[i], 64)
			if err != nil || !(f > 0) {
				return nil, fmt.Errorf("sweep %s: %q is not a factor above 0", sw.Name, p[i])
			}
			scale *= f
			continue
		}
		if err := setPath(root.Content[0], strings.Split(sw.Name, "."), p[i]); err != nil {
			return nil, fmt.Errorf("sweep %s: %w", sw.Name, err)
		}
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		return nil, err
	}
	exp, err := Parse(file, out, read)
	if err != nil {
		return nil, err
	}
	if std >= 0 {
		one := exp.Profile.IterLatency[1].Mean
		for g, d := range exp.Profile.IterLatency {
			if d.Kind != DistNormal && d.Kind != DistLogNormal {
				return nil, fmt.Errorf("sweep %s: the profile's %d-GPU latency is %s, not normal or lognormal", IterLatencyStd, g, d.Kind)
			}
			d.Std = Seconds(std) * d.Mean / one
			exp.Profile.IterLatency[g] = d
		}
	}
	if scale != 1 {
		for g, d := range exp.Profile.IterLatency {
			d.Value, d.Mean, d.Std, d.Min, d.Max = d.Value*Seconds(scale), d.Mean*Seconds(scale), d.Std*Seconds(scale), d.Min*Seconds(scale), d.Max*Seconds(scale)
			for j := range d.Samples {
				d.Samples[j] *= Seconds(scale)
			}
			exp.Profile.IterLatency[g] = d
		}
	}
	return exp, nil
}

// setPath writes value at a path of mapping keys below n, creating mappings as needed.
func setPath(n *yaml.Node, path []string, value string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s is not a mapping in the spec", path[0])
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != path[0] {
			continue
		}
		if len(path) == 1 {
			n.Content[i+1] = scalarNode(value)
			return nil
		}
		child := n.Content[i+1]
		if child.Kind == yaml.ScalarNode { // a shorthand (checkpoints: URL) or a value: replace it
			child = &yaml.Node{Kind: yaml.MappingNode}
			n.Content[i+1] = child
		}
		return setPath(child, path[1:], value)
	}
	key := &yaml.Node{Kind: yaml.ScalarNode, Value: path[0]}
	if len(path) == 1 {
		n.Content = append(n.Content, key, scalarNode(value))
		return nil
	}
	child := &yaml.Node{Kind: yaml.MappingNode}
	n.Content = append(n.Content, key, child)
	return setPath(child, path[1:], value)
}

// scalarNode lets YAML type the value as a user's text would be typed (64 an int, 1s a string).
func scalarNode(value string) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(value), &n); err == nil && len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode {
		return n.Content[0]
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: value}
}
