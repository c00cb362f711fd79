package rundir

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// ViewCache is the file beside a run's journal that keeps what readers drew of the run once no
// driver holds it (its `list` row, its `status`), with the journal's length and CRC-32C: a
// finished 100,000-trial run is shown by checking its journal's bytes instead of replaying its
// million events. The journal stays the truth: what was drawn from another journal (grown, cut
// back, changed), another run folder, or by another build of rubberband is not used, and the
// journal is replayed.
const ViewCache = "view.cache"

// viewCacheVersion is the shape of the cache: bumped when what it keeps changes shape.
const viewCacheVersion = 1

type viewCache struct {
	Version int               `json:"version"`
	Size    int64             `json:"journal_size"`
	CRC     uint32            `json:"journal_crc32c"`
	Folder  string            `json:"folder"` // the folder and what Open loaded of it (folderStamp)
	Binary  string            `json:"binary"` // the build that drew it
	Entries map[string][]byte `json:"entries"`
}

// journalSum is the length and CRC-32C of the run's journal.
func journalSum(dir string) (int64, uint32, error) {
	f, err := os.Open(filepath.Join(dir, Journal))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	return n, h.Sum32(), err
}

// thisBuild names the running executable by its path, size and time: a rebuilt rubberband
// draws anew. "" when it cannot be told (nothing is cached then).
func thisBuild() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	info, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", exe, info.Size(), info.ModTime().UnixNano())
}

// cachedDraw is what draw makes of the run in st under key: the cache's, when it was drawn
// from the journal as it is now (by this build, of this folder), else draw's, kept in the cache
// when draw says no driver holds the run (its journal no longer grows).
func cachedDraw(st *State, key string, draw func() (out []byte, live bool, err error)) ([]byte, bool, error) {
	path := filepath.Join(st.Dir, ViewCache)
	want := viewCache{Version: viewCacheVersion, Folder: st.Dir + "|" + folderStamp(st.Dir), Binary: thisBuild()}
	var sumErr error
	want.Size, want.CRC, sumErr = journalSum(st.Dir) // before drawing: a journal that grows after it is not the one drawn
	var have viewCache
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &have) == nil && sumErr == nil && want.Binary != "" &&
		have.Version == want.Version && have.Size == want.Size && have.CRC == want.CRC && have.Folder == want.Folder && have.Binary == want.Binary {
		if out, ok := have.Entries[key]; ok {
			if _, live, err := ReadHolder(st.Dir); err == nil && !live {
				return out, false, nil
			}
		}
		want.Entries = have.Entries
	}
	out, live, err := draw()
	if err != nil || live || sumErr != nil || want.Binary == "" {
		return out, live, err
	}
	if info, err := os.Stat(filepath.Join(st.Dir, Journal)); err == nil && info.Size() == want.Size {
		if want.Entries == nil {
			want.Entries = map[string][]byte{}
		}
		want.Entries[key] = out
		if b, err := json.Marshal(want); err == nil {
			WriteFile(path, b) // best effort: a folder this reader may not write is drawn anew the next time too
		}
	}
	return out, false, nil
}

// summaryOf is the run's list row (View.Summary), kept in the run's ViewCache.
func summaryOf(st *State) (Summary, error) {
	b, _, err := cachedDraw(st, "summary", func() ([]byte, bool, error) {
		v, err := NewView(st)
		if err != nil {
			return nil, false, err
		}
		b, err := json.Marshal(v.Summary())
		return b, v.Live || v.seen.events == 0, err
	})
	if err != nil {
		return Summary{}, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("list %s: %w", st.Dir, err)
	}
	return s, nil
}
