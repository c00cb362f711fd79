package rundir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/safefile"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Modes of what a run writes: its owner's alone (the umask aside). The spec may hold
// trainer.env secrets; the logs and checkpoints hold the trainer's output and the model.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// Mkdir makes a directory of a run, and its parents, with DirMode.
func Mkdir(path string) error {
	if err := os.MkdirAll(path, DirMode); err != nil {
		return fmt.Errorf("make %s: %w", path, err)
	}
	return nil
}

// WriteFile replaces the file at path with data, atomically and durably (safefile.Write), with
// FileMode.
func WriteFile(path string, data []byte) error { return safefile.Write(path, data, FileMode) }

// WriteJSON writes v as indented JSON with WriteFile.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'))
}

// Free is ROOT/NAME, or the first of NAME-2, NAME-3, … that holds no run yet, so that running a
// spec again starts a new run beside the last one.
func Free(root, name string) string {
	dir := filepath.Join(root, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, RunJSON)); err != nil {
			return dir
		}
		dir = filepath.Join(root, fmt.Sprintf("%s-%d", name, i))
	}
}

// CheckFree says, with an error matching ErrHasRun, when dir already holds a run (or the
// journal of one).
func CheckFree(dir string) error {
	for _, f := range []string{Journal, RunJSON} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return userErr(ErrHasRun, "%s already holds a run: `rubberband resume %s` finishes it, or choose another --state", dir, dir)
		}
	}
	return nil
}

// Create makes dir (made by Mkdir, and locked by the caller) a run: the snapshot of the spec
// from src, the bytes that were parsed into exp (never the files again, which may have changed
// since), the plan, and run.json last, with the spec's path, checksum and copied files filled in,
// and the checkpoint layout of runs made now (each under its own prefix).
func Create(dir string, rf RunFile, src *spec.Source, exp *spec.Experiment, plan *planner.Report) error {
	rf.CheckpointLayout = checkpoint.LayoutPerRun
	if err := snapshot(dir, src, exp, &rf); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(dir, PlanFile), plan); err != nil {
		return err
	}
	return WriteJSON(filepath.Join(dir, RunJSON), rf)
}

// snapshot copies the spec's text and each file it names into dir, and notes in rf where the
// spec came from, its checksum and the copies' names.
func snapshot(dir string, src *spec.Source, exp *spec.Experiment, rf *RunFile) error {
	abs, err := filepath.Abs(src.Path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(src.Data)
	rf.Spec, rf.SpecSHA256, rf.Files = abs, hex.EncodeToString(sum[:]), nil
	if err := WriteFile(filepath.Join(dir, SpecCopy), src.Data); err != nil {
		return err
	}
	for i, ref := range exp.ProfileFiles() { // the spec's profile and each instance type's
		b, ok := src.Files[ref]
		if !ok {
			return fmt.Errorf("copy the spec's profile: %s was not read with the spec", ref)
		}
		if err := Mkdir(filepath.Join(dir, FilesCopy)); err != nil {
			return err
		}
		name := fmt.Sprintf("%d-%s", i, filepath.Base(ref))
		if err := WriteFile(filepath.Join(dir, FilesCopy, name), b); err != nil {
			return err
		}
		if rf.Files == nil {
			rf.Files = map[string]string{}
		}
		rf.Files[ref] = name
	}
	return nil
}

// ChangeSpec makes the spec in src (parsed into exp) the run's, when its stages are the run's
// and the run's plan fits it: journaled (EvSpec), then snapshotted, then run.json rewritten. The
// caller holds the run's lock. It returns the text of the spec it replaced. A spec that cannot
// be the run's is an error matching ErrSpecChange.
func ChangeSpec(st *State, src *spec.Source, exp *spec.Experiment) (old []byte, err error) {
	exp.Seed, exp.Planner.Samples = st.Run.Seed, st.Run.Samples
	if a, b := fmt.Sprint(exp.Algorithm.Brackets()), fmt.Sprint(st.Exp.Algorithm.Brackets()); a != b {
		return nil, userErr(ErrSpecChange, "%s has other stages than the run (%s, the run: %s): start a new run instead", src.Path, a, b)
	}
	if _, err := st.Plan.Alloc(exp.Algorithm.Brackets()); err != nil {
		return nil, userErr(ErrSpecChange, "the run's plan does not fit %s: %v", src.Path, err)
	}
	old, _ = os.ReadFile(filepath.Join(st.Dir, SpecCopy))
	j, _, err := journal.OpenJournal(filepath.Join(st.Dir, Journal))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src.Data)
	err = j.Append(journal.Event{Ev: journal.EvSpec, Spec: hex.EncodeToString(sum[:]), Error: "resume --spec " + src.Path})
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := snapshot(st.Dir, src, exp, &st.Run); err != nil {
		return nil, err
	}
	if err := WriteJSON(filepath.Join(st.Dir, RunJSON), st.Run); err != nil {
		return nil, err
	}
	st.Exp = exp
	return old, nil
}

// OriginalDiff is how the spec file the run was started from differs from the run's own copy,
// as a LineDiff; empty when it does not, or cannot be read.
func (st *State) OriginalDiff() string {
	cur, err := spec.ReadFile(st.Run.Spec)
	if err != nil {
		return ""
	}
	copied, err := os.ReadFile(filepath.Join(st.Dir, SpecCopy))
	if err != nil || bytes.Equal(cur, copied) {
		return ""
	}
	return LineDiff(copied, cur)
}

// LineDiff is a short line diff of two texts: a line "  -N: text" for each line of old that is
// gone, "  +N: text" for each line of new that came.
func LineDiff(old, new []byte) string {
	a, b := strings.Split(string(old), "\n"), strings.Split(string(new), "\n")
	// Longest common subsequence, fine for specs of a few hundred lines.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out bytes.Buffer
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "  +%d: %s\n", j+1, b[j])
			j++
		default:
			fmt.Fprintf(&out, "  -%d: %s\n", i+1, a[i])
			i++
		}
	}
	return out.String()
}

// RequestCancel asks the run's driver to mark the run cancelled when it stops (it is then
// signalled): the marker file CancelFile, stamped with now.
func RequestCancel(dir string, now time.Time) error {
	return WriteFile(filepath.Join(dir, CancelFile), []byte(now.UTC().Format(time.RFC3339)+"\n"))
}

// CancelRequested says whether a cancel was requested and not yet carried out.
func CancelRequested(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, CancelFile))
	return err == nil
}

// CancelDone removes the request once the run is marked cancelled.
func CancelDone(dir string) { os.Remove(filepath.Join(dir, CancelFile)) }
