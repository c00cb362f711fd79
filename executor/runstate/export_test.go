package runstate

import (
	"fmt"
	"math"
	"reflect"
	"time"
)

// DiffStates says where two states differ, "" when they do not: every field, unexported ones
// included, compared deeply, except the log they write to. NaN equals NaN, an empty map or slice
// a nil one, and times the same instant.
func DiffStates(a, b *State) string {
	return diffValues(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "State")
}

func diffValues(a, b reflect.Value, path string) string {
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: %s against %s", path, a.Type(), b.Type())
	}
	if a.Type() == reflect.TypeFor[time.Time]() {
		ta, tb := readTime(a), readTime(b)
		if !ta.Equal(tb) {
			return fmt.Sprintf("%s: %s against %s", path, ta, tb)
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: nil against not", path)
			}
			return ""
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return fmt.Sprintf("%s: %s against %s", path, a.Elem().Type(), b.Elem().Type())
		}
		return diffValues(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			name := a.Type().Field(i).Name
			if name == "log" {
				continue
			}
			if d := diffValues(a.Field(i), b.Field(i), path+"."+name); d != "" {
				return d
			}
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d elements against %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diffValues(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d keys against %d", path, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s[%v]: missing", path, k)
			}
			if d := diffValues(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); d != "" {
				return d
			}
		}
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return fmt.Sprintf("%s: %v against %v", path, x, y)
		}
	case reflect.Func, reflect.Chan:
	default:
		if !a.Equal(b) {
			return fmt.Sprintf("%s: %v against %v", path, a, b)
		}
	}
	return ""
}

// readTime is the instant a time.Time value holds, read from its fields (wall, ext): a value
// reached through an unexported field cannot be had as an interface, but its numbers can be read.
func readTime(v reflect.Value) time.Time {
	const wallToInternal, internalToUnix = 59453308800, -62135596800
	wall, ext := v.Field(0).Uint(), v.Field(1).Int()
	nsec := int64(wall & (1<<30 - 1))
	sec := ext
	if wall&(1<<63) != 0 { // a monotonic reading: the seconds are in wall
		sec = wallToInternal + int64(wall<<1>>31)
	}
	return time.Unix(sec+internalToUnix, nsec)
}
