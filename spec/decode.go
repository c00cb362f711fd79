package spec

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a spec, located by file, line and field path.
type Problem struct {
	File string
	Line int
	Path string
	Msg  string
}

func (p Problem) String() string {
	file := p.File
	if file == "" {
		file = "<spec>"
	}
	if p.Path == "" {
		return fmt.Sprintf("%s:%d: %s", file, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", file, p.Line, p.Path, p.Msg)
}

// Problems is every problem found in a spec; it is the error Parse and Load return.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// maxNodes bounds the YAML nodes one decode visits, so that alias bombs cannot blow up memory.
const maxNodes = 100000

// decoder walks a yaml.Node tree into Go values by their yaml tags, recording the line of every
// field and collecting every problem instead of stopping at the first.
type decoder struct {
	file  string
	lines map[string]int
	// failed holds the paths whose value could not be decoded (wrong type, given twice): they
	// keep their zero value, which validation must not judge.
	failed map[string]bool
	// fatal says nothing usable was decoded (not YAML, empty, too large): validating would only
	// list every field as missing.
	fatal bool
	// gridTrials is the path of a trials count written "grid" (the grid sampler's size).
	gridTrials string
	probs      Problems
	budget     int
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}, failed: map[string]bool{}, budget: maxNodes}
}

func (d *decoder) problem(line int, path, format string, args ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// fail reports a value that could not be decoded and marks its path failed.
func (d *decoder) fail(line int, path, format string, args ...any) {
	d.failed[path] = true
	d.problem(line, path, format, args...)
}

// document decodes a whole YAML document into v.
func (d *decoder) document(data []byte, v any) {
	if len(data) > MaxFileSize { // checked before parsing: the parser's memory grows with the input
		d.fatal = true
		d.problem(1, "", "the document is %d bytes, more than the %d (%d MiB) a spec or profile may hold", len(data), MaxFileSize, MaxFileSize>>20)
		return
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		line := 0
		var n int
		if _, scanErr := fmt.Sscanf(err.Error(), "yaml: line %d:", &n); scanErr == nil {
			line = n
		}
		d.fatal = true
		d.problem(line, "", "not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		d.fatal = true
		d.problem(1, "", "the document is empty")
		return
	}
	d.decode(root.Content[0], reflect.ValueOf(v).Elem(), "", root.Content[0].Line)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, line int) {
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.fatal = true
			d.problem(line, path, "document too large (more than %d YAML nodes, aliases included)", maxNodes)
		}
		return
	}
	for n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return
		}
		n = n.Alias
	}
	if path != "" {
		d.lines[path] = line
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if v.CanAddr() {
		switch p := v.Addr().Interface().(type) {
		case *Seconds:
			d.seconds(n, p, path, line)
			return
		case *Contention:
			if n.Kind == yaml.MappingNode { // by GPU count
				d.decodeMap(n, reflect.ValueOf(&p.ByGPUs).Elem(), path, line)
			} else {
				d.seconds(n, &p.All, path, line)
			}
			return
		case *Duration:
			d.duration(n, p, path, line)
			return
		case *Checkpoints:
			if n.Kind == yaml.ScalarNode { // the URL alone
				p.URL = n.Value
				return
			}
		case *AnyOf:
			if n.Kind == yaml.ScalarNode { // one value alone
				*p = AnyOf{typedScalar(n.Tag, n.Value)}
				return
			}
		case *int:
			if n.Kind == yaml.ScalarNode && n.Value == "grid" && (path == "algorithm.sha.trials" || path == "algorithm.stages[0].trials") {
				d.gridTrials = path // filled in from the grid's size (applyDefaults)
				return
			}
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path, line)
	case reflect.Struct:
		d.decodeStruct(n, v, path, line)
	case reflect.Map:
		d.decodeMap(n, v, path, line)
	case reflect.Slice:
		d.decodeSlice(n, v, path, line)
	case reflect.String:
		if s, ok := d.scalar(n, path, line, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Int, reflect.Int64:
		s, ok := d.scalar(n, path, line, "an integer")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil || n.Tag != "!!int" || (v.Kind() == reflect.Int && (i > math.MaxInt32 || i < math.MinInt32)) {
			d.fail(line, path, "%q is not an integer (expected a whole number such as 4)", s)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, ok := d.scalar(n, path, line, "a number")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil || (n.Tag != "!!int" && n.Tag != "!!float") || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(line, path, "%q is not a number (expected a finite number such as 0.5)", s)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		s, ok := d.scalar(n, path, line, "true or false")
		if !ok {
			return
		}
		b, err := strconv.ParseBool(s)
		if err != nil || n.Tag != "!!bool" {
			d.fail(line, path, "%q is not a boolean (expected true or false)", s)
			return
		}
		v.SetBool(b)
	case reflect.Interface:
		if s, ok := d.scalar(n, path, line, "a scalar (string, number or boolean)"); ok {
			v.Set(reflect.ValueOf(typedScalar(n.Tag, s)))
		}
	default:
		d.fail(line, path, "cannot decode into %s", v.Type())
	}
}

// typedScalar keeps a choice value's YAML type: 64 stays an int, 0.1 a float, "relu" a string.
func typedScalar(tag, s string) any {
	switch tag {
	case "!!int":
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			return i
		}
	case "!!float":
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	case "!!bool":
		if b, err := strconv.ParseBool(s); err == nil {
			return b
		}
	}
	return s
}

func (d *decoder) scalar(n *yaml.Node, path string, line int, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(line, path, "expected %s, found %s", want, kindName(n))
		return "", false
	}
	return n.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a scalar"
	}
}

func (d *decoder) seconds(n *yaml.Node, p *Seconds, path string, line int) {
	s, ok := d.scalar(n, path, line, "a duration")
	if !ok {
		return
	}
	if n.Tag == "!!int" || n.Tag == "!!float" {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			*p = Seconds(f)
			return
		}
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(line, path, "%q is not a duration (a number of seconds or a Go duration such as 15s or 1m30s)", s)
		return
	}
	*p = Seconds(dur.Seconds())
}

func (d *decoder) duration(n *yaml.Node, p *Duration, path string, line int) {
	s, ok := d.scalar(n, path, line, "a duration")
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(line, path, "%q is not a duration (a Go duration with a unit, such as 20m, 90s or 1h30m)", s)
		return
	}
	*p = Duration(dur)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.fail(line, path, "expected a mapping, found %s", kindName(n))
		return
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		fields[name] = i
		names = append(names, name)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		sub := joinPath(path, key.Value)
		idx, ok := fields[key.Value]
		if !ok {
			d.problem(key.Line, sub, "unknown field (allowed: %s)", strings.Join(names, ", "))
			continue
		}
		if seen[key.Value] {
			d.fail(key.Line, sub, "given twice")
			continue
		}
		seen[key.Value] = true
		d.decode(val, v.Field(idx), sub, key.Line)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.fail(line, path, "expected a mapping, found %s", kindName(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	kt := v.Type().Key()
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		sub := joinPath(path, key.Value)
		k := reflect.New(kt).Elem()
		switch kt.Kind() {
		case reflect.String:
			k.SetString(key.Value)
		case reflect.Int:
			i, err := strconv.Atoi(key.Value)
			if err != nil {
				d.fail(key.Line, sub, "key %q is not a whole number", key.Value)
				continue
			}
			k.SetInt(int64(i))
		}
		if v.MapIndex(k).IsValid() {
			d.fail(key.Line, sub, "given twice")
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, sub, key.Line)
		v.SetMapIndex(k, elem)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.SequenceNode {
		d.fail(line, path, "expected a list, found %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), item.Line)
	}
	v.Set(s)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// sortedKeys returns a map's keys in order, so that every walk over a map is deterministic.
func sortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
