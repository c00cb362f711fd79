package virtual

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// Faults is a schedule of what goes wrong in one virtual run. Each fault names what it strikes
// by its place in the run (the n-th journal record, node rented, launch), so that a schedule
// replays exactly on the same spec: Draw makes one from a seed.
type Faults struct {
	Seed int64 `json:"seed"`
	// Crashes: the driver dies writing these journal records (numbered from 1 over the whole
	// journal), after writing them whole or, Torn, half; the run is resumed at once by a new
	// driver in the same world.
	Crashes []Crash `json:"crashes,omitempty"`
	// Losses: the n-th node rented dies After it started running (its gangs fail, unsaved).
	Losses []NodeFault `json:"losses,omitempty"`
	// Notices: the n-th node rented, a spot node, gets its interruption notice After it started.
	Notices []NodeFault `json:"notices,omitempty"`
	// LaunchFails: these launches (numbered from 1 over the run) fail before anything starts.
	LaunchFails []int `json:"launch_fails,omitempty"`
	// TrainerCrashes and Hangs: the launch's trainer dies, or hangs until stopped, at its
	// iteration At (counted from where it started).
	TrainerCrashes []LaunchFault `json:"trainer_crashes,omitempty"`
	Hangs          []LaunchFault `json:"hangs,omitempty"`

	scale Scale // what Draw placed the faults within

	mu    sync.Mutex
	seen  int          // journal records written so far, over every driver
	fired map[int]bool // crashes that happened (a torn record is written again by the next driver)
}

// Crash is a driver's death at a journal record.
type Crash struct {
	Record int  `json:"record"`
	Torn   bool `json:"torn,omitempty"`
}

// NodeFault strikes the n-th node rented, After it started running.
type NodeFault struct {
	Node  int           `json:"node"`
	After time.Duration `json:"after"`
}

// LaunchFault strikes launch Launch at its At-th iteration.
type LaunchFault struct {
	Launch int `json:"launch"`
	At     int `json:"at"`
}

// Scale is how big a clean run of the job was: what a schedule's faults are placed within.
type Scale struct {
	Records, Nodes, Launches int
	Duration                 time.Duration
	Spot                     bool // the job rents spot nodes: notices make sense
}

// Draw makes a schedule from seed for a run of scale s: a few faults of each kind (none of
// some), placed uniformly over the run.
func Draw(seed int64, s Scale) *Faults {
	r := rand.New(rand.NewPCG(uint64(seed), 0xfa17))
	f := &Faults{Seed: seed, scale: s}
	some := func(most int) int { return r.IntN(most + 1) }
	if s.Records > 1 {
		for range some(3) {
			f.Crashes = append(f.Crashes, Crash{Record: 1 + r.IntN(s.Records), Torn: r.IntN(3) == 0})
		}
		slices.SortFunc(f.Crashes, func(a, b Crash) int { return a.Record - b.Record })
		f.Crashes = slices.CompactFunc(f.Crashes, func(a, b Crash) bool { return a.Record == b.Record })
	}
	after := func() time.Duration { return time.Duration(r.Float64() * float64(max(s.Duration, time.Second)) / 2) }
	if s.Nodes > 0 {
		for range some(2) {
			f.Losses = append(f.Losses, NodeFault{Node: 1 + r.IntN(s.Nodes), After: after()})
		}
		if s.Spot {
			for range some(2) {
				f.Notices = append(f.Notices, NodeFault{Node: 1 + r.IntN(s.Nodes), After: after()})
			}
		}
	}
	if s.Launches > 0 {
		for range some(2) {
			f.LaunchFails = append(f.LaunchFails, 1+r.IntN(s.Launches))
		}
		for range some(2) {
			f.TrainerCrashes = append(f.TrainerCrashes, LaunchFault{Launch: 1 + r.IntN(s.Launches), At: 1 + r.IntN(3)})
		}
		for range some(1) {
			f.Hangs = append(f.Hangs, LaunchFault{Launch: 1 + r.IntN(s.Launches), At: 1 + r.IntN(3)})
		}
	}
	return f
}

// Scale is what the schedule was drawn for.
func (f *Faults) Scale() Scale { return f.scale }

// String lists the schedule.
func (f *Faults) String() string {
	var parts []string
	for _, c := range f.Crashes {
		torn := ""
		if c.Torn {
			torn = ", torn"
		}
		parts = append(parts, fmt.Sprintf("driver crash at journal record %d%s", c.Record, torn))
	}
	for _, l := range f.Losses {
		parts = append(parts, fmt.Sprintf("node #%d lost %s after it started", l.Node, l.After.Round(time.Second)))
	}
	for _, n := range f.Notices {
		parts = append(parts, fmt.Sprintf("spot notice to node #%d %s after it started", n.Node, n.After.Round(time.Second)))
	}
	for _, l := range f.LaunchFails {
		parts = append(parts, fmt.Sprintf("launch %d fails", l))
	}
	for _, c := range f.TrainerCrashes {
		parts = append(parts, fmt.Sprintf("launch %d's trainer crashes at its iteration %d", c.Launch, c.At))
	}
	for _, h := range f.Hangs {
		parts = append(parts, fmt.Sprintf("launch %d's trainer hangs at its iteration %d", h.Launch, h.At))
	}
	if len(parts) == 0 {
		return "no faults"
	}
	return strings.Join(parts, "; ")
}

// nodeUp arms the node faults of node n, which just started running; w.mu is held.
func (f *Faults) nodeUp(w *World, n *node) {
	for _, l := range f.Losses {
		if l.Node == n.index {
			id := n.ID
			n.timers = append(n.timers, w.clk.AfterFunc(l.After, func() {
				w.mu.Lock()
				w.trigger("node %s lost", id)
				w.mu.Unlock()
				w.lose(id, "lost (injected)")
			}))
		}
	}
	for _, o := range f.Notices {
		if o.Node == n.index && n.offer.Spot != nil {
			id := n.ID
			n.timers = append(n.timers, w.clk.AfterFunc(o.After, func() {
				w.mu.Lock()
				w.trigger("spot notice to node %s", id)
				w.mu.Unlock()
				w.interrupt(id, fmt.Sprintf("spot interruption notice (virtual, injected): node %s ends in %s", id, w.notice))
			}))
		}
	}
}

// errLaunch is an injected launch failure.
var errLaunch = errors.New("the launch failed to start (injected)")

// launch applies the launch faults to gang g, the world's w.launches-th launch; w.mu is held.
// A trial gets at most one injected failure per stage target, so that no schedule exhausts its
// retries: the run must still find the clean run's winner.
func (f *Faults) launch(w *World, g *worldGang) error {
	key := fmt.Sprintf("%s@%d", g.trial, g.target)
	if w.injected[key] {
		return nil
	}
	n := w.launches
	if slices.Contains(f.LaunchFails, n) {
		w.injected[key] = true
		w.trigger("launch %d (%s) fails", n, g.trial)
		return fmt.Errorf("launch %s: %w", g.trial, errLaunch)
	}
	for _, c := range f.TrainerCrashes {
		if c.Launch == n && g.from+c.At <= g.target {
			w.injected[key] = true
			g.crashAt = g.from + c.At
			return nil
		}
	}
	for _, h := range f.Hangs {
		if h.Launch == n && g.from+h.At <= g.target {
			w.injected[key] = true
			g.hangAt = g.from + h.At
			return nil
		}
	}
	return nil
}

// ErrCrashed is what the journal of a driver killed by a crash fault answers.
var ErrCrashed = errors.New("virtual: the driver crashed here (injected)")

// Journal wraps driver epoch's journal file: at a crash record it writes the record whole or
// half, then dies — severing the driver from the world and calling die (which cancels the
// driver's context) — and refuses everything from then on, as a dead process does.
func (f *Faults) Journal(w *World, epoch int, die func()) func(journal.JournalFile) journal.JournalFile {
	return func(file journal.JournalFile) journal.JournalFile {
		return &crashingFile{f: f, file: file, die: func() { w.Sever(epoch); die() }, w: w}
	}
}

// Written sets how many records the journal holds before a driver opens it.
func (f *Faults) Written(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = n
}

type crashingFile struct {
	f    *Faults
	file journal.JournalFile
	w    *World
	die  func()
	dead bool
}

func (c *crashingFile) Write(b []byte) (int, error) {
	if c.dead {
		return 0, ErrCrashed
	}
	c.f.mu.Lock()
	c.f.seen++
	record := c.f.seen
	crash := slices.IndexFunc(c.f.Crashes, func(cr Crash) bool { return cr.Record == record })
	if crash >= 0 && c.f.fired[record] {
		crash = -1
	}
	if crash >= 0 {
		if c.f.fired == nil {
			c.f.fired = map[int]bool{}
		}
		c.f.fired[record] = true
	}
	c.f.mu.Unlock()
	if crash < 0 {
		return c.file.Write(b)
	}
	cr := c.f.Crashes[crash]
	part := b
	how := "after writing it"
	if cr.Torn {
		part, how = b[:len(b)/2], "half way through writing it"
	}
	n, _ := c.file.Write(part)
	c.dead = true
	c.w.mu.Lock()
	c.w.trigger("the driver crashed at journal record %d, %s", record, how)
	c.w.mu.Unlock()
	c.die()
	return n, ErrCrashed
}

func (c *crashingFile) Sync() error {
	if c.dead {
		return ErrCrashed
	}
	return c.file.Sync()
}

func (c *crashingFile) Truncate(size int64) error {
	if c.dead {
		return ErrCrashed
	}
	return c.file.Truncate(size)
}

func (c *crashingFile) Close() error { return c.file.Close() }
