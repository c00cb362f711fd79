package journal

import (
	"fmt"
	"time"
)

// NewRunID names a run: when it started and 32 random bits, short enough for job names and
// instance tags, unique enough that two runs of one spec never share it.
func NewRunID(now time.Time, random uint32) string {
	return fmt.Sprintf("r%s-%08x", now.UTC().Format("20060102-150405"), random)
}
