package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// failingMirror fails every call, as a database that is down would.
type failingMirror struct{ *mirror.Dir }

var errDown = errors.New("the database is down")

func (failingMirror) List(context.Context, string) ([]mirror.File, error) { return nil, errDown }

// A mirrored server copies a new run's folder before recording the run, refuses a spec whose
// checkpoints would stay in the run's folder, and, when the mirror cannot be read, does not
// drive the run (nor end it): it is tried again at the next step.
func TestMirroredServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := teamML(t, dir)
	m := &mirror.Dir{Root: filepath.Join(dir, "mirror")}
	sup := &Supervisor{Binary: "/bin/false", Mirror: &Mirror{Store: m, At: "dir:" + m.Root}}
	s := New(Config{Store: st, Root: filepath.Join(dir, "root"), Backend: "local", Holder: "test", Supervisor: sup})
	src, err := os.ReadFile("../e2e/testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alice := store.User{Name: "alice", Team: "ml"}
	if _, _, err := s.Submit(ctx, alice, Submission{Spec: string(src)}); err == nil || !strings.Contains(err.Error(), "checkpoints.url") {
		t.Fatalf("a spec with its checkpoints in the run's folder: %v", err)
	}
	spec := string(src) + "checkpoints: {url: 'file://" + filepath.Join(dir, "ckpt") + "'}\n"
	run, _, err := s.Submit(ctx, alice, Submission{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	files, err := m.List(ctx, mirrorKey("ml", run.ID))
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if err != nil || !strings.Contains(strings.Join(names, " "), "plan.json run.json spec.yaml") {
		t.Fatalf("the mirror holds %v (%v) of the new run", names, err)
	}

	sup.Mirror.Store = failingMirror{m}
	_, err = sup.Drive(ctx, s.runDir("ml", run.ID), mirrorKey("ml", run.ID))
	if !errors.Is(err, errMirror) || !errors.Is(err, errDown) {
		t.Fatalf("Drive with the mirror down: %v, want errMirror and the cause", err)
	}
}
