package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pidsFile is what a gang's pids file holds: the identity of each of its workers' processes, so
// that a later driver ends these processes and no other. A PID alone names whatever process has
// the number by then.
type pidsFile struct {
	BootID  string      `json:"boot_id"` // /proc/sys/kernel/random/boot_id: a start time means something within one boot
	Workers []pidRecord `json:"workers"`
}

type pidRecord struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // clock ticks after boot, /proc/PID/stat field 22
	Token string `json:"token"` // TokenVar's value in the worker's environment and its descendants'
}

func (h *handle) pidFile() string { return filepath.Join(h.r.WorkDir, h.trial, "pids") }

// writePIDs records the gang's workers, so that a resumed driver can end them. The file is
// replaced by a rename, never seen half written, and only its owner may read it. It is not
// synced: it means something only while this boot lasts (a crash of the machine ends the
// processes, and the boot ID then discards the file).
func (h *handle) writePIDs() error {
	boot, err := bootID()
	if err != nil {
		h.r.logf("trial %s: the workers' identity cannot be recorded (%v): a resumed driver will not end them", h.trial, err)
	}
	rec := pidsFile{BootID: boot}
	for _, w := range h.workers {
		rec.Workers = append(rec.Workers, pidRecord{PID: w.pid(), Start: w.start, Token: w.token})
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return writeFileAtomic(h.pidFile(), b)
}

// writeFileAtomic writes path 0600 through a temporary file renamed over it.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readPIDs reads a pids file. A file of bare PIDs (written before identities were recorded)
// or one without a boot ID is refused: it cannot tell the processes it names from others.
func readPIDs(path string) (pidsFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pidsFile{}, err
	}
	var rec pidsFile
	if err := json.Unmarshal(b, &rec); err != nil {
		if fields := strings.Fields(string(b)); len(fields) > 0 && allNumbers(fields) {
			return pidsFile{}, fmt.Errorf("it names PIDs %s without their processes' identity (written by an older rubberband)", strings.Join(fields, ", "))
		}
		return pidsFile{}, fmt.Errorf("malformed: %w", err)
	}
	if rec.BootID == "" {
		return pidsFile{}, errors.New("it has no boot ID")
	}
	return rec, nil
}

func allNumbers(fields []string) bool {
	for _, f := range fields {
		if _, err := strconv.Atoi(f); err != nil {
			return false
		}
	}
	return true
}

// Reap ends the gangs an earlier driver left, as their pids files record them, and waits until
// they are gone (a few seconds at most). A recorded worker is ended only if it is still the
// process recorded: same boot, same start time; then its process group is ended whole. What
// the workers left behind is found by their tokens. A pids file that cannot prove its
// processes' identity is not trusted: Reap says so in the runtime's log, ends nothing for it,
// and removes it.
func (r *Runtime) Reap(ctx context.Context) error {
	if err := r.endCgroup(); err != nil { // a dead driver's workers, and all they started
		r.logf("resume: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(r.WorkDir, "*", "pids"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	boot, err := bootID()
	if err != nil {
		r.logf("resume: the earlier driver's workers cannot be told from other processes (%v): none ended, %d pids file(s) kept", err, len(files))
		return nil
	}
	for _, f := range files {
		trialID := filepath.Base(filepath.Dir(f))
		rec, err := readPIDs(f)
		switch {
		case err != nil:
			r.logf("resume: %s: %v: not trusted, no process ended for trial %s (end them by hand if they still run)", f, err, trialID)
		case rec.BootID != boot:
			r.logf("resume: %s is from before the machine restarted: its processes are gone", f)
		default:
			r.reapGang(trialID, rec)
		}
		os.Remove(f)
	}
	return nil
}

// reapGang ends a recorded gang: the process groups of its workers that are still the processes
// recorded, and whatever carries their tokens.
func (r *Runtime) reapGang(trialID string, rec pidsFile) {
	groups := map[int]bool{}
	tokens := map[string]bool{}
	for _, w := range rec.Workers {
		if validToken(w.Token) {
			tokens[w.Token] = true
		}
		if w.PID <= 1 || w.Start == 0 {
			continue
		}
		if st, err := readStat(w.PID); err == nil && st.start == w.Start && !st.dead() {
			groups[w.PID] = true
		}
	}
	ended := r.endStrays(selector{groups: groups, token: func(t string) bool { return tokens[t] }})
	if len(ended) > 0 {
		r.logf("resume: ended %s left by the previous driver (trial %s)", describe(ended), trialID)
	}
}
