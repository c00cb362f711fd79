package rundir

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
)

// newRun writes examples/digits-mlp.yaml and its profile into a folder, loads it, plans it and
// makes dir a run of it.
func newRun(t *testing.T) (dir, specPath string, src *spec.Source) {
	t.Helper()
	tmp := t.TempDir()
	specPath = filepath.Join(tmp, "job.yaml")
	for from, to := range map[string]string{"../examples/digits-mlp.yaml": specPath, "../examples/profiles/digits-mlp.yaml": filepath.Join(tmp, "profiles", "digits-mlp.yaml")} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(to), 0o700)
		os.WriteFile(to, b, 0o600)
	}
	exp, src, err := spec.LoadSource(specPath)
	if err != nil {
		t.Fatal(err)
	}
	exp.Planner.Samples = 20
	rep, _, err := planner.PlanSpec(context.Background(), exp)
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(tmp, "runs", "job")
	if err := Mkdir(dir); err != nil {
		t.Fatal(err)
	}
	// The files change after they were read: the run keeps what was read.
	os.WriteFile(specPath, []byte("name: edited\n"), 0o600)
	os.WriteFile(filepath.Join(tmp, "profiles", "digits-mlp.yaml"), []byte("edited: true\n"), 0o600)
	if err := Create(dir, RunFile{RunID: "r1", Backend: "local", TimeScale: 1, Samples: 20, Seed: exp.Seed}, src, exp, rep); err != nil {
		t.Fatal(err)
	}
	return dir, specPath, src
}

// Create snapshots the bytes that were parsed (not the files, edited since), writes every file
// 0600 in a 0700 directory and leaves no temporary file; the run it makes opens.
func TestCreate(t *testing.T) {
	dir, specPath, src := newRun(t)
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Exp.Name != "digits-mlp" || st.Run.Spec != specPath || len(st.Run.Files) != 1 {
		t.Fatalf("opened %s from %s, files %v", st.Exp.Name, st.Run.Spec, st.Run.Files)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SpecCopy)); !bytes.Equal(b, src.Data) {
		t.Errorf("the spec's copy is not what was parsed:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FilesCopy, st.Run.Files["profiles/digits-mlp.yaml"])); !bytes.Equal(b, src.Files["profiles/digits-mlp.yaml"]) {
		t.Errorf("the profile's copy is not what was parsed:\n%s", b)
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		want := FileMode
		if d.IsDir() {
			want = DirMode
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s is %#o, want %#o", path, info.Mode().Perm(), want)
		}
		if strings.HasSuffix(path, ".tmp") {
			t.Errorf("left behind: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFree(dir); !errors.Is(err, ErrHasRun) {
		t.Errorf("CheckFree of a run: %v", err)
	}
	if got := Free(filepath.Dir(dir), "job"); got != dir+"-2" {
		t.Errorf("Free: %s", got)
	}
	if d := st.OriginalDiff(); !strings.Contains(d, "+1: name: edited") {
		t.Errorf("the original's diff: %q", d)
	}
}

// ChangeSpec refuses a spec with other stages, by ErrSpecChange, and journals and snapshots one
// the run's plan fits.
func TestChangeSpec(t *testing.T) {
	dir, _, src := newRun(t)
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(filepath.Dir(st.Run.Spec), "profiles", "digits-mlp.yaml"), src.Files["profiles/digits-mlp.yaml"], 0o600)
	other := filepath.Join(filepath.Dir(st.Run.Spec), "other.yaml")
	os.WriteFile(other, bytes.Replace(src.Data, []byte("trials: 27"), []byte("trials: 9"), 1), 0o600)
	exp, osrc, err := spec.LoadSource(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ChangeSpec(st, osrc, exp); !errors.Is(err, ErrSpecChange) || !strings.Contains(err.Error(), "other stages") {
		t.Errorf("other stages: %v", err)
	}
	same := filepath.Join(filepath.Dir(st.Run.Spec), "same.yaml")
	os.WriteFile(same, bytes.Replace(src.Data, []byte("seed:"), []byte("# a comment\nseed:"), 1), 0o600)
	exp, ssrc, err := spec.LoadSource(same)
	if err != nil {
		t.Fatal(err)
	}
	old, err := ChangeSpec(st, ssrc, exp)
	if err != nil || !bytes.Equal(old, src.Data) {
		t.Fatalf("change: %v", err)
	}
	events, err := journal.ReadJournal(filepath.Join(dir, Journal))
	if err != nil || len(events) != 1 || events[0].Ev != journal.EvSpec {
		t.Fatalf("journal %v, %v", events, err)
	}
	again, err := Open(dir)
	if err != nil || again.Run.Spec != same {
		t.Fatalf("reopened: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SpecCopy)); !bytes.Equal(b, ssrc.Data) {
		t.Errorf("the new spec's copy:\n%s", b)
	}
}

func TestCancelRequest(t *testing.T) {
	dir := t.TempDir()
	if CancelRequested(dir) {
		t.Fatal("requested before it was")
	}
	if err := RequestCancel(dir, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil || !CancelRequested(dir) {
		t.Fatalf("request: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, CancelFile)); string(b) != "2026-01-02T03:04:05Z\n" {
		t.Errorf("the request says %q", b)
	}
	CancelDone(dir)
	if CancelRequested(dir) {
		t.Fatal("still requested once done")
	}
}

func TestLineDiff(t *testing.T) {
	got := LineDiff([]byte("a\nb\nc\n"), []byte("a\nB\nc\nd\n"))
	want := "  +2: B\n  -2: b\n  +4: d\n"
	if got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
}
