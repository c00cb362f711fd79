package ui

import (
	"io"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// The run page's trial table is a page of the run's trials, with their count and links to the
// pages beside it; another page than the first is left alone by the stream (its element is not
// the section the stream replaces). A bad page is a 400.
func TestRunPageTrialsArePaged(t *testing.T) {
	root := t.TempDir()
	if _, err := rundirtest.Large(root, "big", 27, 9, 0); err != nil {
		t.Fatal(err)
	}
	_, hs := newTestServer(t, Config{Root: root, Log: io.Discard})
	rows := func(page string) int { return strings.Count(page, `/log">tail</a>`) }
	for _, c := range []struct {
		query      string
		rows       int
		shown      string
		prev, next string // "" when there is none
		stream     bool
	}{
		{"", 27, "trials 1-27 of", "", "", true},
		{"?limit=10", 10, "trials 1-10 of", "", "offset=10&amp;limit=10", false},
		{"?offset=10&limit=10", 10, "trials 11-20 of", "offset=0&amp;limit=10", "offset=20&amp;limit=10", false},
		{"?offset=20&limit=10", 7, "trials 21-27 of", "offset=10&amp;limit=10", "", false},
	} {
		code, page := get(t, hs.URL+"/runs/big"+c.query)
		if code != 200 {
			t.Fatalf("%s: %d", c.query, code)
		}
		if n := rows(page); n != c.rows {
			t.Errorf("%s: %d rows; want %d", c.query, n, c.rows)
		}
		if !strings.Contains(page, c.shown) || !strings.Contains(page, `<span id="trials-total">27</span>`) {
			t.Errorf("%s: the pager does not say %q of 27", c.query, c.shown)
		}
		for id, want := range map[string]string{"trials-prev": c.prev, "trials-next": c.next} {
			has := strings.Contains(page, `id="`+id+`"`)
			if has != (want != "") || want != "" && !strings.Contains(page, `/runs/big?`+want+`" id="`+id+`"`) {
				t.Errorf("%s: link %s wrong (want %q)", c.query, id, want)
			}
		}
		if streamed := strings.Contains(page, `<div id="sec-trials">`); streamed != c.stream {
			t.Errorf("%s: the stream's section: %v; want %v", c.query, streamed, c.stream)
		}
	}
	for _, q := range []string{"?limit=0", "?offset=-1", "?limit=1001"} {
		if code, _ := get(t, hs.URL+"/runs/big"+q); code != 400 {
			t.Errorf("%s: %d; want 400", q, code)
		}
	}
}
