package mirror

import (
	"path"
	"strings"
)

// Layout says how the files of a run directory are copied.
type Layout struct {
	// Journal is the journal's name: JournalWrap copies it as it is synced; Pusher leaves it.
	Journal string
	// Grown are the files only ever appended to (a name, or a folder as "logs/"): copied by
	// their new bytes. Any other file is copied whole when it changes.
	Grown []string
	// Skip are what is not copied (a name, or a folder as "work/"): what belongs to the
	// machine, not the run (a worker's scratch, a local lock, local agents' data).
	Skip []string
}

func matches(list []string, name string) bool {
	for _, p := range list {
		if name == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(name, p)) {
			return true
		}
	}
	return false
}

// skipped: not copied. Dotfiles are a writer's temporaries (a file being replaced) or a store's.
func (l Layout) skipped(name string) bool {
	return matches(l.Skip, name) || isTemp(path.Base(name))
}

func (l Layout) grown(name string) bool { return name == l.Journal || matches(l.Grown, name) }

func isTemp(base string) bool { return strings.HasPrefix(base, ".") }
