package ui

import (
	"reflect"
	"testing"

	rbclock "github.com/rubberband-hpo/rubberband/executor/clock"
)

// A live run's page is drawn at Config.Clock's time, not the wall clock's: the same clock draws
// the same page, and a later one draws the running launches longer.
func TestLivePageIsDrawnAtTheConfiguredClock(t *testing.T) {
	root := t.TempDir()
	handMade(t, root, "live", firstStage()[:7]) // both launches open
	draw := func(sec float64) *runPage {
		s, err := New(Config{Root: root, Clock: rbclock.Frozen{At: at(sec)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		h, err := s.hub("live")
		if err != nil {
			t.Fatal(err)
		}
		h.refresh()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.live = true // as though its driver held the run
		return h.build()
	}
	if a, b := draw(40), draw(40); !reflect.DeepEqual(a.Realized, b.Realized) || !reflect.DeepEqual(a.Cost, b.Cost) {
		t.Errorf("two pages drawn at one clock's time differ")
	}
	if a, b := draw(40), draw(80); reflect.DeepEqual(a.Realized, b.Realized) {
		t.Errorf("the running launches are drawn alike at 40 s and at 80 s: the page does not read the clock")
	}
}
