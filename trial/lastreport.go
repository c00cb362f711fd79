package trial

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LastReportFile is kept by the runtime in a saved checkpoint directory, beside the trainer's own
// files: the last report rank 0 printed before that checkpoint was taken. Saved in the same
// atomic commit as the checkpoint, it lets a relaunch whose checkpoint is already at its target
// re-report the result instead of training: a driver that died after the save but before it
// journaled the result must not lose that result (the trainer, rightly, trains nothing then and
// prints no report).
const LastReportFile = ".rubberband-last-report.json"

// SaveLastReport writes r into the checkpoint directory dir, atomically.
func SaveLastReport(dir string, r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("save last report: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save last report: %w", err)
	}
	// A fresh temporary file, never one already there: the directory may be a sandboxed
	// trainer's, and a link it left at a fixed name would take the write elsewhere.
	f, err := os.CreateTemp(dir, LastReportFile+".tmp*")
	if err != nil {
		return fmt.Errorf("save last report: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save last report: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, LastReportFile)); err != nil {
		return fmt.Errorf("save last report: %w", err)
	}
	return nil
}

// LoadLastReport reads the last report kept in the checkpoint directory dir; ok is false when
// there is none (a first launch, or a checkpoint from before this file existed).
func LoadLastReport(dir string) (r Report, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, LastReportFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, fmt.Errorf("load last report: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, false, fmt.Errorf("load last report: %s: %w", filepath.Join(dir, LastReportFile), err)
	}
	return r, true, nil
}

// AtTarget returns the kept report when the checkpoint in dir is already at (or past) target: the
// launch has nothing to train and re-reports it.
func AtTarget(dir string, target int) (Report, bool, error) {
	r, ok, err := LoadLastReport(dir)
	if err != nil || !ok || r.Iter < target {
		return Report{}, false, err
	}
	return r, true, nil
}
