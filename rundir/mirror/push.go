package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// Pusher copies a run directory's changed files to a store: what grew by its new bytes, what
// changed whole, what went by deleting it. The journal is JournalWrap's. One Pusher per run,
// used by one goroutine at a time.
type Pusher struct {
	Store  Store
	Run    string // the run's key in the store
	Dir    string // its directory here
	Layout Layout

	sent map[string]sent // what the store holds of each file, as this Pusher knows it
}

type sent struct {
	size int64
	mod  time.Time // zero: not pushed by this Pusher (listed)
}

// Push copies what changed since the last Push (since what the store held, the first time). It
// goes on past a file it cannot copy and returns every failure.
func (p *Pusher) Push(ctx context.Context) error {
	if p.sent == nil {
		listed, err := p.Store.List(ctx, p.Run)
		if err != nil {
			return err
		}
		p.sent = map[string]sent{}
		for _, f := range listed {
			p.sent[f.Name] = sent{size: f.Size}
		}
	}
	var errs []error
	here := map[string]bool{}
	err := walk(p.Dir, p.Layout, func(name string, info fs.FileInfo) {
		here[name] = true
		if name == p.Layout.Journal {
			return
		}
		if err := p.push(ctx, name, info); err != nil {
			errs = append(errs, fmt.Errorf("mirror %s: %w", name, err))
		}
	})
	if err != nil {
		errs = append(errs, err)
	}
	for name := range p.sent {
		if !here[name] && name != p.Layout.Journal && !p.Layout.skipped(name) {
			if err := p.Store.Delete(ctx, p.Run, name); err != nil {
				errs = append(errs, fmt.Errorf("mirror %s: %w", name, err))
				continue
			}
			delete(p.sent, name)
		}
	}
	return errors.Join(errs...)
}

func (p *Pusher) push(ctx context.Context, name string, info fs.FileInfo) error {
	was, known := p.sent[name]
	if known && was.size == info.Size() && (p.Layout.grown(name) || was.mod.Equal(info.ModTime())) {
		return nil
	}
	path := filepath.Join(p.Dir, filepath.FromSlash(name))
	if p.Layout.grown(name) && known && info.Size() > was.size {
		more, err := readFrom(path, was.size)
		if err != nil {
			return err
		}
		err = p.Store.Append(ctx, p.Run, name, was.size, more)
		if err == nil {
			p.sent[name] = sent{size: was.size + int64(len(more)), mod: info.ModTime()}
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
		// Someone else's bytes: the whole file replaces them below.
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := p.Store.Put(ctx, p.Run, name, data); err != nil {
		return err
	}
	p.sent[name] = sent{size: int64(len(data)), mod: info.ModTime()}
	return nil
}

// Restore brings dir up to date with the store's copy of run, before a driver resumes it or a
// server reads it: it fetches what the store holds beyond this directory's copy. Where this
// directory is ahead (a journal a driver here wrote before its copy was made) it copies that to
// the store instead; where the two differ, the store's wins and the directory's file is kept
// beside as NAME.diverged-TIME. A grown file (the journal, logs) is compared by the 64 KiB
// before the shorter copy's end, not whole: copies that differ only before that are taken to
// agree. It returns what it did that is worth saying, and nothing at all for a run the store
// does not hold.
func Restore(ctx context.Context, s Store, run, dir string, l Layout, now time.Time) (notes []string, err error) {
	files, err := s.List(ctx, run)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	journalBehind := false
	remote := map[string]bool{} // and the copies kept aside here

	for _, f := range files {
		remote[f.Name] = true
		if l.skipped(f.Name) {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return notes, err
		}
		if l.grown(f.Name) {
			done, behind, note, err := restoreGrown(ctx, s, run, f, path, f.Name == l.Journal)
			if err != nil {
				return notes, err
			}
			if note != "" {
				notes = append(notes, note)
			}
			journalBehind = journalBehind || (behind && f.Name == l.Journal)
			if done {
				continue
			}
		}
		theirs, err := s.Read(ctx, run, f.Name, 0)
		if err != nil {
			return notes, err
		}
		ours, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return notes, err
		}
		switch {
		case bytes.Equal(ours, theirs):
		case l.grown(f.Name) && bytes.HasPrefix(ours, theirs): // ahead here
			if f.Name == l.Journal {
				if err := s.Append(ctx, run, f.Name, int64(len(theirs)), ours[len(theirs):]); err != nil {
					return notes, err
				}
				notes = append(notes, fmt.Sprintf("%s: copied %d bytes the mirror lacked", f.Name, len(ours)-len(theirs)))
			}
		case l.grown(f.Name) && bytes.HasPrefix(theirs, ours): // behind here
			journalBehind = journalBehind || f.Name == l.Journal
			if err := appendFile(path, int64(len(ours)), theirs[len(ours):]); err != nil {
				return notes, err
			}
		default:
			if ours != nil && l.grown(f.Name) {
				suffix := ".diverged-" + now.UTC().Format("20060102T150405Z")
				aside := path + suffix
				if err := os.Rename(path, aside); err != nil {
					return notes, err
				}
				remote[f.Name+suffix] = true // kept here, and copied by the next Push
				notes = append(notes, fmt.Sprintf("%s differed from the mirror's copy: the mirror's is taken, this one kept in %s", f.Name, aside))
				journalBehind = journalBehind || f.Name == l.Journal
			}
			if err := safefile.Write(path, theirs, 0o600); err != nil {
				return notes, err
			}
		}
	}
	if !journalBehind {
		return notes, nil
	}
	// The store's copy is the newer: what it no longer holds (a cancel request since served)
	// goes here too.
	err = walk(dir, l, func(name string, _ fs.FileInfo) {
		if !remote[name] && !l.grown(name) {
			os.Remove(filepath.Join(dir, filepath.FromSlash(name)))
		}
	})
	return notes, err
}

// walk calls fn for each file of dir the layout copies, by its slash-separated name.
func walk(dir string, l Layout, fn func(name string, info fs.FileInfo)) error {
	return filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil // gone while walking (a temporary file renamed)
		}
		rel, _ := filepath.Rel(dir, path)
		name := filepath.ToSlash(rel)
		if e.IsDir() {
			if path != dir && (l.skipped(name+"/") || isTemp(e.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || l.skipped(name) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		fn(name, info)
		return nil
	})
}

func readFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// appendFile writes more into the file at path at offset at (its length), fsynced.
func appendFile(path string, at int64, more []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(more, at); err != nil {
		return err
	}
	return f.Sync()
}

// overlap is how many bytes before the shorter copy's end restoreGrown compares.
const overlap = 64 << 10

// restoreGrown brings a grown file (only ever appended to) up to date by its ends: where the
// copy here and the store's agree on the overlap bytes before the shorter one's end, the longer
// one's further bytes are copied, and nothing else is read. A server that reads a 100,000-trial
// run it does not drive read its 170 MB journal twice, here and from the store, to answer each
// request. done is false where the ends disagree (or the file is not here): the caller compares
// the whole copies then. behind says the copy here grew; note says what was copied to the store
// (the journal only: what Push copies is left to it).
func restoreGrown(ctx context.Context, s Store, run string, f File, path string, journal bool) (done, behind bool, note string, err error) {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		return false, false, "", nil
	}
	n := info.Size()
	at := max(0, min(n, f.Size)-overlap)
	theirs, err := s.Read(ctx, run, f.Name, at)
	if err != nil {
		return false, false, "", err
	}
	ours, err := readFrom(path, at)
	if err != nil {
		return false, false, "", err
	}
	k := min(int64(len(ours)), int64(len(theirs)), min(n, f.Size)-at) // the store may have grown since List
	if k < min(n, f.Size)-at || !bytes.Equal(ours[:k], theirs[:k]) {
		return false, false, "", nil
	}
	switch {
	case len(theirs) > len(ours): // behind here
		return true, true, "", appendFile(path, at+int64(len(ours)), theirs[len(ours):])
	case len(ours) > len(theirs) && journal: // ahead here
		if err := s.Append(ctx, run, f.Name, at+int64(len(theirs)), ours[len(theirs):]); err != nil {
			return false, false, "", err
		}
		return true, false, fmt.Sprintf("%s: copied %d bytes the mirror lacked", f.Name, len(ours)-len(theirs)), nil
	}
	return true, false, "", nil
}
