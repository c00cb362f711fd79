package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
)

const run = "teams/ml/r1"

var layout = mirror.Layout{Journal: "journal.jsonl", Grown: []string{"logs/", "driver.log"}, Skip: []string{"work/", "lock"}}

func remote(t *testing.T, s mirror.Store, name string) string {
	t.Helper()
	b, err := s.Read(context.Background(), run, name, 0)
	if err != nil {
		t.Fatalf("the mirror's %s: %v", name, err)
	}
	return string(b)
}

func local(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openJournal opens the journal at path, mirrored to s.
func openJournal(t *testing.T, s mirror.Store, path string) (*journal.Journal, []journal.Event, error) {
	t.Helper()
	wrap, err := mirror.JournalWrap(context.Background(), s, run, "journal.jsonl", path)
	if err != nil {
		return nil, nil, err
	}
	return journal.OpenJournalWith(path, journal.JournalOptions{Wrap: func(f journal.JournalFile) journal.JournalFile { return wrap(f) }})
}

// A decision is in the mirror when Append returns; a noted result once it is synced; a second
// driver of the run that does not know of the first's records fails at its first sync, and its
// journal stops (no decision after a gap).
func TestJournalCopiedAtEachSync(t *testing.T) {
	s := &mirror.Dir{Root: t.TempDir()}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _, err := openJournal(t, s, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvStart, RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := remote(t, s, "journal.jsonl"), local(t, path); got != want {
		t.Fatalf("after Append the mirror holds %q, the journal %q", got, want)
	}
	if err := j.Note(journal.Event{Ev: journal.EvLaunch, Trial: "t1"}); err != nil {
		t.Fatal(err)
	}
	if got := remote(t, s, "journal.jsonl"); strings.Contains(got, "t1") {
		t.Fatalf("a noted event was copied before its sync: %q", got)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := remote(t, s, "journal.jsonl"), local(t, path); got != want {
		t.Fatalf("after Sync the mirror holds %q, the journal %q", got, want)
	}

	// A stale driver: its copy of the directory from before t1.
	stale := filepath.Join(t.TempDir(), "journal.jsonl")
	first, _, _ := strings.Cut(local(t, path), "\n")
	os.WriteFile(stale, []byte(first+"\n"), 0o600)
	if _, _, err := openJournal(t, s, stale); err == nil || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("a journal behind the mirror's opened: %v", err)
	}
	// And one that raced: the same records, then the other driver appends first.
	raced := filepath.Join(t.TempDir(), "journal.jsonl")
	os.WriteFile(raced, []byte(local(t, path)), 0o600)
	j2, past, err := openJournal(t, s, raced)
	if err != nil || len(past) != 2 {
		t.Fatalf("open a copy: %d events, %v", len(past), err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvLaunch, Trial: "t2"}); err != nil {
		t.Fatal(err)
	}
	err = j2.Append(journal.Event{Ev: journal.EvLaunch, Trial: "t9"})
	if !errors.Is(err, mirror.ErrConflict) {
		t.Fatalf("the second driver's Append: %v, want ErrConflict", err)
	}
	if err := j2.Append(journal.Event{Ev: journal.EvLaunch, Trial: "t10"}); err == nil {
		t.Fatal("the second driver's journal went on after its copy failed")
	}
	if got := remote(t, s, "journal.jsonl"); strings.Contains(got, "t9") || !strings.Contains(got, "t2") {
		t.Fatalf("the mirror holds %q", got)
	}
}

// Records a driver wrote and died before copying go with the next driver's first sync; a torn
// last record, cut when the journal opens, never reaches the mirror.
func TestJournalWrapCarriesWhatTheMirrorLacks(t *testing.T) {
	s := &mirror.Dir{Root: t.TempDir()}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _, err := journal.OpenJournal(path) // not mirrored: a driver that died before copying
	if err != nil {
		t.Fatal(err)
	}
	j.Append(journal.Event{Ev: journal.EvStart, RunID: "r1"})
	j.Append(journal.Event{Ev: journal.EvLaunch, Trial: "t1"})
	j.Close()
	whole := local(t, path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ev":"launch","tri`)
	f.Close()

	j, past, err := openJournal(t, s, path)
	if err != nil || len(past) != 2 {
		t.Fatalf("reopen: %d events, %v", len(past), err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvLaunch, Trial: "t2"}); err != nil {
		t.Fatal(err)
	}
	got := remote(t, s, "journal.jsonl")
	if !strings.HasPrefix(got, whole) || strings.Contains(got, `"tri"`) || got != local(t, path) {
		t.Fatalf("the mirror holds %q; the journal %q", got, local(t, path))
	}
	j.Close()
}

func write(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, s mirror.Store) string {
	t.Helper()
	files, err := s.List(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Name)
	}
	return strings.Join(out, " ")
}

// The Pusher copies what grew by its new bytes, what changed whole, deletes what went, and
// leaves the journal (JournalWrap's), the machine's own files and writers' temporaries.
func TestPusher(t *testing.T) {
	ctx := context.Background()
	s := &mirror.Dir{Root: t.TempDir()}
	dir := t.TempDir()
	write(t, dir, "run.json", `{"run_id":"r1"}`)
	write(t, dir, "journal.jsonl", "not the pusher's\n")
	write(t, dir, "logs/t1.log", "line 1\n")
	write(t, dir, "work/w1/scratch", "x")
	write(t, dir, "lock", "pid")
	write(t, dir, ".report.json.123.tmp", "half")
	write(t, dir, "cancel", "")
	p := &mirror.Pusher{Store: s, Run: run, Dir: dir, Layout: layout}
	if err := p.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, s), "cancel logs/t1.log run.json"; got != want {
		t.Fatalf("pushed %q, want %q", got, want)
	}
	// The mirror's copy of the log is grown, not replaced: a byte changed in the part already
	// copied stays as copied (logs are only appended to).
	write(t, dir, "logs/t1.log", "LINE 1\nline 2\n")
	os.Remove(filepath.Join(dir, "cancel"))
	write(t, dir, "run.json", `{"run_id":"r2"}`)
	later := time.Now().Add(time.Minute) // a changed mtime, whatever the clock's grain
	os.Chtimes(filepath.Join(dir, "run.json"), later, later)
	if err := p.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, s), "logs/t1.log run.json"; got != want {
		t.Errorf("after a delete: %q, want %q", got, want)
	}
	if got := remote(t, s, "logs/t1.log"); got != "line 1\nline 2\n" {
		t.Errorf("the log: %q", got)
	}
	if got := remote(t, s, "run.json"); got != `{"run_id":"r2"}` {
		t.Errorf("a file of the same size, changed: %q", got)
	}
	// A new Pusher (a server restarted) starts from what the mirror holds: nothing twice.
	write(t, dir, "logs/t1.log", "LINE 1\nline 2\nline 3\n")
	p2 := &mirror.Pusher{Store: s, Run: run, Dir: dir, Layout: layout}
	if err := p2.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if got := remote(t, s, "logs/t1.log"); got != "line 1\nline 2\nline 3\n" {
		t.Errorf("the log after a new Pusher: %q", got)
	}
}

// Restore fetches what a directory lacks, copies a journal it holds more of, keeps a diverged
// copy aside, and, when the mirror is the newer, drops a whole file the mirror no longer holds.
func TestRestore(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	s := &mirror.Dir{Root: t.TempDir()}
	dir := filepath.Join(t.TempDir(), "r1")
	if notes, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil || notes != nil {
		t.Fatalf("restoring a run the mirror lacks: %v, %v", notes, err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("restoring a run the mirror lacks made its folder")
	}
	s.Put(ctx, run, "run.json", []byte("{}"))
	s.Append(ctx, run, "journal.jsonl", 0, []byte("a\nb\n"))
	s.Append(ctx, run, "logs/t1.log", 0, []byte("one\ntwo\n"))
	if _, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil {
		t.Fatal(err)
	}
	if local(t, filepath.Join(dir, "journal.jsonl")) != "a\nb\n" || local(t, filepath.Join(dir, "logs/t1.log")) != "one\ntwo\n" || local(t, filepath.Join(dir, "run.json")) != "{}" {
		t.Fatal("a new folder is not the mirror's copy")
	}

	// Here ahead: the journal's extra records go to the mirror.
	write(t, dir, "journal.jsonl", "a\nb\nc\n")
	notes, err := mirror.Restore(ctx, s, run, dir, layout, now)
	if err != nil || remote(t, s, "journal.jsonl") != "a\nb\nc\n" || len(notes) != 1 {
		t.Fatalf("a journal ahead here: mirror %q, notes %v, %v", remote(t, s, "journal.jsonl"), notes, err)
	}

	// Here behind, and a cancel request here the mirror no longer holds (served).
	s.Append(ctx, run, "journal.jsonl", 6, []byte("d\n"))
	write(t, dir, "cancel", "")
	if _, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil {
		t.Fatal(err)
	}
	if got := local(t, filepath.Join(dir, "journal.jsonl")); got != "a\nb\nc\nd\n" {
		t.Errorf("a journal behind here: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "cancel")); err == nil {
		t.Error("a served cancel request came back")
	}

	// Diverged: the mirror's copy wins, this one is kept beside.
	write(t, dir, "journal.jsonl", "a\nX\n")
	notes, err = mirror.Restore(ctx, s, run, dir, layout, now)
	if err != nil || local(t, filepath.Join(dir, "journal.jsonl")) != "a\nb\nc\nd\n" {
		t.Fatalf("a diverged journal: %q, %v", local(t, filepath.Join(dir, "journal.jsonl")), err)
	}
	aside := filepath.Join(dir, "journal.jsonl.diverged-20261126T230000Z")
	if local(t, aside) != "a\nX\n" || len(notes) != 1 || !strings.Contains(notes[0], aside) {
		t.Errorf("the diverged copy: notes %v", notes)
	}
}

// readCounter is a Store that counts the bytes read from it.
type readCounter struct {
	mirror.Store
	read int
}

func (r *readCounter) Read(ctx context.Context, run, name string, offset int64) ([]byte, error) {
	b, err := r.Store.Read(ctx, run, name, offset)
	r.read += len(b)
	return b, err
}

// A long journal is restored by its ends: what the mirror gained is copied here, what it lacks
// is copied to it, reading its last bytes, not the whole; ends that differ are a divergence
// (the mirror's copy wins, this one is kept beside), as for a short one.
func TestRestoreLongJournalByItsEnds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	s := &readCounter{Store: &mirror.Dir{Root: t.TempDir()}}
	dir := filepath.Join(t.TempDir(), "r1")
	var base strings.Builder
	for i := 0; base.Len() < 400<<10; i++ {
		fmt.Fprintf(&base, "record %07d\n", i)
	}
	s.Append(ctx, run, "journal.jsonl", 0, []byte(base.String()))
	if _, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "journal.jsonl")
	want := base.String() + "more\n"
	s.Append(ctx, run, "journal.jsonl", int64(base.Len()), []byte("more\n"))
	s.read = 0
	if _, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil || local(t, path) != want {
		t.Fatalf("a long journal behind here: %d bytes, want %d; %v", len(local(t, path)), len(want), err)
	}
	if s.read > 100<<10 {
		t.Errorf("restoring 5 bytes read %d bytes of the mirror's 400 KB journal", s.read)
	}

	want += "extra\n"
	write(t, dir, "journal.jsonl", want)
	notes, err := mirror.Restore(ctx, s, run, dir, layout, now)
	if err != nil || remote(t, s, "journal.jsonl") != want || len(notes) != 1 {
		t.Fatalf("a long journal ahead here: mirror %d bytes, want %d; notes %v, %v", len(remote(t, s, "journal.jsonl")), len(want), notes, err)
	}

	diverged := want[:len(want)-100] + "X" + want[len(want)-99:]
	write(t, dir, "journal.jsonl", diverged)
	if _, err := mirror.Restore(ctx, s, run, dir, layout, now); err != nil || local(t, path) != want {
		t.Fatalf("a long diverged journal is not the mirror's copy: %v", err)
	}
	if local(t, filepath.Join(dir, "journal.jsonl.diverged-20261126T230000Z")) != diverged {
		t.Errorf("the diverged copy is not kept beside")
	}
}
