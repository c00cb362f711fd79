package rundir

import (
	"fmt"
	"strconv"
)

// ParsePage reads a page of a long list (a run's trials) from a request's offset and limit:
// offset "" is 0, limit "" is def; a limit above most, or not a count, is an error that says
// what is allowed.
func ParsePage(offset, limit string, def, most int) (int, int, error) {
	o, l := 0, def
	var err error
	if offset != "" {
		if o, err = strconv.Atoi(offset); err != nil || o < 0 {
			return 0, 0, fmt.Errorf("offset %q: want a count of rows, 0 or more", offset)
		}
	}
	if limit != "" {
		if l, err = strconv.Atoi(limit); err != nil || l < 1 || l > most {
			return 0, 0, fmt.Errorf("limit %q: want 1 to %d rows", limit, most)
		}
	}
	return o, l, nil
}

// PageBounds are the bounds [from, to) of the page at offset of limit rows among total.
func PageBounds(total, offset, limit int) (from, to int) {
	from = min(max(offset, 0), total)
	return from, min(from+limit, total)
}
