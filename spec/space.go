package spec

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// A search space's parameters may be conditional (Param.When): a parameter is active while every
// choice parameter its condition names is active and holds one of the listed values. Inactive
// parameters are absent from a trial's configuration, everywhere it goes (the trainer's
// environment, the journal, the report).

// Active says whether the parameter name is active in the configuration c, whose parents (the
// parameters named by conditions) are decided already.
func Active(space map[string]Param, name string, c Config) bool {
	for parent, values := range space[name].When {
		v, ok := c[parent]
		if !ok || !values.Has(v) {
			return false
		}
	}
	return true
}

// Has says whether v is one of the values (1 and 1.0 are the same value; "1" is not).
func (a AnyOf) Has(v any) bool {
	return slices.ContainsFunc(a, func(w any) bool { return SameValue(v, w) })
}

// SameValue compares two choice values as YAML means them: numbers by value, the rest exactly.
func SameValue(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && fa == fb
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// ParamOrder is the space's parameters in the order conditions are decided: name order, each
// parameter after the parameters its condition names. It assumes sound conditions (no cycles).
func ParamOrder(space map[string]Param) []string {
	order := make([]string, 0, len(space))
	placed := make(map[string]bool, len(space))
	var place func(string)
	place = func(name string) {
		if placed[name] {
			return
		}
		placed[name] = true
		for _, parent := range sortedKeys(space[name].When) {
			if _, ok := space[parent]; ok {
				place(parent)
			}
		}
		order = append(order, name)
	}
	for _, name := range sortedKeys(space) {
		place(name)
	}
	return order
}

// Prune removes from c the parameters that are inactive under c's own values, deciding parents
// first; c is changed in place and returned.
func Prune(space map[string]Param, c Config) Config {
	if !Conditional(space) { // nothing to decide: spares ordering the space per configuration
		return c
	}
	for _, name := range ParamOrder(space) {
		if !Active(space, name, c) {
			delete(c, name)
		}
	}
	return c
}

// Conditional says whether any parameter of the space has a condition.
func Conditional(space map[string]Param) bool {
	for _, p := range space {
		if len(p.When) > 0 {
			return true
		}
	}
	return false
}

// GridValues are the values a parameter takes on a grid of points per numeric parameter: a
// choice's values; points evenly spaced from min to max (log-spaced for loguniform, rounded and
// kept once for int); one point is the middle of the range.
func (p Param) GridValues(points int) []any {
	if p.Type == "choice" {
		return p.Values
	}
	lo, hi := p.Min, p.Max
	if p.Type == "loguniform" {
		lo, hi = math.Log(lo), math.Log(hi)
	}
	var out []any
	for i := range points {
		f := 0.5
		if points > 1 {
			f = float64(i) / float64(points-1)
		}
		x := lo + f*(hi-lo)
		switch p.Type {
		case "loguniform":
			out = append(out, math.Exp(x))
		case "int":
			n := int64(math.Round(x))
			if len(out) == 0 || out[len(out)-1].(int64) != n {
				out = append(out, n)
			}
		default:
			out = append(out, x)
		}
	}
	return out
}

// GridSize counts the grid's reachable configurations, up to limit: ok is false above it.
func GridSize(space map[string]Param, points, limit int) (n int, ok bool) {
	ok = walkGrid(space, points, func(Config) bool {
		n++
		return n <= limit
	})
	return n, ok
}

// GridConfigs enumerates the grid's reachable configurations in a fixed order (parameters in
// ParamOrder, the last varying fastest), at most limit of them.
func GridConfigs(space map[string]Param, points, limit int) []Config {
	var out []Config
	walkGrid(space, points, func(c Config) bool {
		if len(out) == limit {
			return false
		}
		out = append(out, maps.Clone(c))
		return true
	})
	return out
}

// walkGrid calls visit with every reachable combination until visit returns false; it reports
// whether the walk was complete. An inactive parameter is skipped, not branched on: a grid under
// conditions holds each reachable configuration once.
func walkGrid(space map[string]Param, points int, visit func(Config) bool) bool {
	order := ParamOrder(space)
	values := make([][]any, len(order))
	for i, name := range order {
		values[i] = space[name].GridValues(points)
	}
	c := Config{}
	var walk func(i int) bool
	walk = func(i int) bool {
		if i == len(order) {
			return visit(c)
		}
		name := order[i]
		if !Active(space, name, c) {
			return walk(i + 1)
		}
		for _, v := range values[i] {
			c[name] = v
			if !walk(i + 1) {
				return false
			}
		}
		delete(c, name)
		return true
	}
	return walk(0)
}

// conditions checks every when: it names a choice parameter of the space, with values it
// takes, and no parameter depends on itself through a chain.
func (v *validator) conditions() {
	space := v.e.SearchSpace
	for _, name := range sortedKeys(space) {
		for _, parent := range sortedKeys(space[name].When) {
			path := fmt.Sprintf("search_space.%s.when.%s", name, parent)
			pp, ok := space[parent]
			switch {
			case parent == name:
				v.add(path, "a parameter cannot depend on itself")
			case !ok:
				v.add(path, "%q is not a parameter of the search space", parent)
			case pp.Type != "choice":
				v.add(path, "%q is a %s parameter: a condition names a choice parameter", parent, pp.Type)
			default:
				values := space[name].When[parent]
				if len(values) == 0 {
					v.add(path, "names no value")
				}
				for _, val := range values {
					if !slices.ContainsFunc(pp.Values, func(w any) bool { return SameValue(val, w) }) {
						v.add(path, "%v is not one of %s's values %v", val, parent, pp.Values)
					}
				}
			}
		}
	}
	if cycle := conditionCycle(space); cycle != nil {
		v.add("search_space."+cycle[0]+".when", "the conditions form a cycle: %s", strings.Join(cycle, " -> "))
	}
}

// conditionsSound says whether the conditions are usable: no cycle, every parent a choice.
func (e *Experiment) conditionsSound() bool {
	for _, p := range e.SearchSpace {
		for parent := range p.When {
			if pp, ok := e.SearchSpace[parent]; !ok || pp.Type != "choice" {
				return false
			}
		}
	}
	return conditionCycle(e.SearchSpace) == nil
}

// conditionCycle returns the first cycle of conditions, as the names around it (first repeated
// last), or nil.
func conditionCycle(space map[string]Param) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(name string) []string {
		switch mark[name] {
		case onPath:
			i := slices.Index(path, name)
			return append(slices.Clone(path[i:]), name)
		case done:
			return nil
		}
		mark[name] = onPath
		path = append(path, name)
		for _, parent := range sortedKeys(space[name].When) {
			if _, ok := space[parent]; ok && parent != name {
				if c := visit(parent); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
		return nil
	}
	for _, name := range sortedKeys(space) {
		if c := visit(name); c != nil {
			return c
		}
	}
	return nil
}
