package rundir

import (
	"bytes"
	"fmt"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
	"github.com/rubberband-hpo/rubberband/planner"
)

// MaxPlanFile bounds a plan file: a plan of 100 brackets is about 100 KiB, and a wrong path (a
// log, a disk image) is refused before it is read into memory.
const MaxPlanFile = 4 << 20

// ReadPlanFile reads the plan file at path (a run's plan.json, or the one `plan --out` wrote):
// a regular file of at most MaxPlanFile bytes (a FIFO, a device or a bigger file is refused, by
// name, before it is read), decoded by planner.ReadReport (planner does no I/O).
func ReadPlanFile(path string) (*planner.Report, error) {
	data, err := safefile.Read(path, MaxPlanFile, "a plan file")
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return planner.ReadReport(bytes.NewReader(data))
}
