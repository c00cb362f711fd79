package rundir

import (
	"encoding/json"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// SummaryCache is the file beside a run's journal that keeps its `list` row once no driver
// holds the run, with the journal's length and checksum: `list` of a finished 100,000-trial run
// checks the journal's bytes instead of replaying its million events. The journal stays the
// truth: a cache whose journal is not the one it was made from (grown, cut back, changed) is
// not used, and the journal is replayed.
const SummaryCache = "summary.cache"

// summaryCacheVersion is the shape of the cached Summary: bumped when Summary changes, so that
// rows of an older shape are made anew.
const summaryCacheVersion = 1

type summaryCache struct {
	Version int     `json:"version"`
	Size    int64   `json:"journal_size"`
	CRC     uint32  `json:"journal_crc32c"`
	Summary Summary `json:"summary"`
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

// summaryOf is the run's list row: its cache's, when the cache was made from the journal as it
// is now, else a replay's (cached when no driver holds the run: its journal no longer grows).
func summaryOf(st *State) (Summary, error) {
	path := filepath.Join(st.Dir, SummaryCache)
	if _, live, err := ReadHolder(st.Dir); err == nil && !live {
		if b, err := os.ReadFile(path); err == nil {
			var c summaryCache
			size, sum, serr := journalSum(st.Dir)
			if json.Unmarshal(b, &c) == nil && serr == nil && c.Version == summaryCacheVersion && c.Size == size && c.CRC == sum && c.Summary.Dir == st.Dir {
				return c.Summary, nil
			}
		}
	}
	size, sum, sumErr := journalSum(st.Dir) // before the replay: a journal that grows after it is not the one replayed
	v, err := NewView(st)
	if err != nil {
		return Summary{}, err
	}
	s := v.Summary()
	if info, err := os.Stat(filepath.Join(st.Dir, Journal)); !v.Live && v.seen.events > 0 && sumErr == nil && err == nil && info.Size() == size {
		if b, err := json.Marshal(summaryCache{Version: summaryCacheVersion, Size: size, CRC: sum, Summary: s}); err == nil {
			WriteFile(path, b) // best effort: a folder this reader may not write is replayed the next time too
		}
	}
	return s, nil
}
