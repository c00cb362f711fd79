package codebundle

import (
	"bufio"
	"bytes"
	"path"
	"strings"
)

// IgnoreFiles are the files in a bundle's root whose patterns leave paths out, in the order
// they apply (a later file's pattern, like a later line, wins).
var IgnoreFiles = [2]string{".gitignore", ".rbignore"}

// alwaysLeftOut are the names never packed, at any depth: the run's state folder (runs land in
// the folder `run` is started from, often the trainer's own) and git's.
var alwaysLeftOut = [2]string{".rubberband", ".git"}

// pattern is one line of an ignore file, in gitignore's terms.
type pattern struct {
	glob     string // slash-separated segments; "**" matches any number of them
	negate   bool   // "!": re-includes what an earlier pattern left out
	dirOnly  bool   // a trailing "/": directories only
	anchored bool   // a "/" before the end: relative to the root, not to any folder
}

// Ignore is the patterns of a bundle's ignore files.
type Ignore struct{ patterns []pattern }

// ParseIgnore adds the patterns of one ignore file's text: blank lines and "#" comments are
// skipped, "\#" and "\!" escape, trailing spaces are trimmed.
func (ig *Ignore) ParseIgnore(data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(strings.TrimSuffix(sc.Text(), "\r"), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var p pattern
		if strings.HasPrefix(line, "!") {
			p.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			p.anchored = true
			line = strings.TrimPrefix(line, "/")
		}
		if line == "" {
			continue
		}
		p.glob = line
		ig.patterns = append(ig.patterns, p)
	}
}

// Ignored says whether rel (slash-separated, relative to the root) is left out; isDir says it
// is a folder. The last pattern that matches decides, as in git.
func (ig *Ignore) Ignored(rel string, isDir bool) bool {
	base := path.Base(rel)
	for _, n := range alwaysLeftOut {
		if base == n {
			return true
		}
	}
	ignored := false
	for _, p := range ig.patterns {
		if p.dirOnly && !isDir {
			continue
		}
		if p.matches(rel) {
			ignored = !p.negate
		}
	}
	return ignored
}

func (p pattern) matches(rel string) bool {
	if !p.anchored && !strings.Contains(p.glob, "/") {
		return globMatch([]string{p.glob}, []string{path.Base(rel)})
	}
	return globMatch(strings.Split(p.glob, "/"), strings.Split(rel, "/"))
}

// globMatch matches path segments against pattern segments, each with path.Match, "**"
// standing for any number of segments.
func globMatch(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if globMatch(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
