package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README.md is the user's first page: at most 150 lines (it was 389, contributor detail mixed
// in); the rest lives in docs/.
func TestReadmeIsAFirstPage(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 150 {
		t.Errorf("README.md has %d lines: at most 150 (move the rest into docs/)", n)
	}
	for _, section := range []string{"## Quick start", "## Use", "## Where next"} {
		if !strings.Contains(string(data), "\n"+section) {
			t.Errorf("README.md lacks %q", section)
		}
	}
}

// Every relative link of README.md and docs/*.md leads to a file that exists, and a #fragment
// into a Markdown file to one of its headings.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../")
		for i, line := range markdownProse(string(data)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
					continue // a URL
				}
				path, frag, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s:%d: link %s: no such file", name, i+1, target)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(resolved, ".md") && !hasHeading(t, resolved, frag) {
					t.Errorf("%s:%d: link %s: no heading #%s there", name, i+1, target, frag)
				}
			}
		}
	}
}

// markdownProse is a Markdown text's lines with those of fenced code blocks blanked: links in
// code are not links.
func markdownProse(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return lines
}

// hasHeading reports whether the Markdown file has a heading whose GitHub anchor is frag.
func hasHeading(t *testing.T, file, frag string) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, l := range markdownProse(string(data)) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		if strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-") == frag {
			return true
		}
	}
	return false
}
