package executor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A stage's decisions are a pure function: stage.step takes what happened (an event) and what
// the run knows (a stageView) and says what to do (actions); the stage loop (stage.go) performs
// the actions and feeds back the events. step does no I/O, starts nothing and reads no clock,
// so it runs the same live, in virtual time and under injected faults, and is tested alone.

// eventKind is what happened to a stage.
type eventKind int

const (
	evCancel   eventKind = iota // the run is being stopped: stop every gang, launch nothing more
	evStarted                   // launch n's gang started (the loop holds its handle)
	evExited                    // launch n's workers ended: its GPUs are free
	evEnded                     // launch n is over: o says how
	evChecked                   // after launch n failed, the provider said which nodes are gone: lost
	evReplaced                  // a request for replacement nodes ended (err)
	evTimeout                   // launch n ran past its budget
	evWork                      // the source answered acWant: jobs, the parallelism and nodes to keep now, exhausted
	evFault                     // the loop met an infrastructure fault (err: the journal's disk is full): pause
	evNotice                    // node is being interrupted (why): it goes a notice later
	evReported                  // launch n reported (its checkpoint is there), as acStopAtReport asked
)

// stageEvent is one event of a stage.
type stageEvent struct {
	kind   eventKind
	launch int
	handle gang.Handle // evStarted
	o      outcome
	lost   lostSet // evChecked: the nodes gone or going
	cause  error   // evChecked: why the launch is not done
	err    error   // evChecked: the provider could not be asked; evReplaced: the request failed
	// evWork: more jobs, the gangs that may run at once and the nodes to hold from now on, and
	// whether the source is exhausted (it hands out nothing more, ever).
	jobs      []job
	parallel  int
	keep      int
	exhausted bool
	node, why string // evNotice
}

// job is one trial's work in a stage loop: train it through stage k's iterations st (for ASHA,
// rung k's), each launch given budget of wall time.
type job struct {
	trial   string
	bracket int // the trial's (a loop's nodes are one bracket's; ASHA's trials are of several)
	k       int
	st      spec.Stage
	budget  time.Duration
}

// outcome is how one launch ended.
type outcome struct {
	trial    string
	err      error // nil: the gang exited 0
	metrics  map[string]float64
	iter     int
	began    time.Time
	exitedAt time.Time
	gpus     int
	started  bool // the runtime started the gang (Launch returned a handle)
}

// actionKind is what the loop is asked to do.
type actionKind int

const (
	acLaunch       actionKind = iota // journal trial's launch (try) on slots, start and follow its gang
	acStop                           // stop launch n's gang (its checkpoint is saved)
	acTimeout                        // journal that launch n of trial ran past its budget
	acCheckNodes                     // ask the provider which nodes are gone after launch n failed
	acForget                         // journal the loss of nodes (they stop billing)
	acRelease                        // release nodes journaled as lost that no gang uses any more
	acFail                           // journal a failed try of trial (retry: whether it is queued again)
	acDone                           // journal that trial reached the stage's target
	acReplace                        // rent replacement nodes
	acLog                            // say something
	acWant                           // ask the source for more jobs (free: the gangs that could start now)
	acRetire                         // release nodes the loop no longer needs (nodes): no gang runs on them
	acEnd                            // the stage is over: err nil, or why it failed
	acStopAtReport                   // say when launch n next reports (evReported)
)

// action is one thing to do.
type action struct {
	kind        actionKind
	trial       string
	k           int // the stage of trial's job (acLaunch, acTimeout, acFail, acDone)
	bracket     int // the bracket of trial's job (the same)
	job         job // acLaunch
	launch      int
	try         int
	slots       []placement.Slot
	o           outcome
	cause       error                  // acFail: why the try failed
	interrupted bool                   // acFail: the try lost its node
	retry       bool                   // acFail
	lost        lostSet                // acForget
	nodes       []string               // acRelease, acRetire
	free        int                    // acWant
	count       int                    // acReplace: the nodes to hold
	doomed      *gang.InterruptedError // acCheckNodes
	text        string                 // acLog
	err         error                  // acEnd
}

// lostSet is nodes gone or going, by ID: why, and whether the provider still holds them (a node
// being interrupted bills until it is released).
type lostSet map[string]lostNode

type lostNode struct {
	why  string
	held bool
}

// stageView is what a stage's decisions read of the run beyond the stage itself.
type stageView interface {
	// nodes is what the bracket holds now.
	nodes() []cloud.Node
	// nodesGen changes whenever nodes would answer otherwise.
	nodesGen() uint64
	// tries counts trial's launches, failed tries and tries that lost a node, in stage k.
	tries(trial string, k int) (launches, fails, interrupts int)
}

// stage is one stage's decision state; or an ASHA run's, whose jobs (each a trial through one
// rung) come from a source as gangs end (acWant, evWork), and whose cluster shrinks as it says.
type stage struct {
	b          int
	gpt        int // GPUs per trial
	parallel   int // gangs at once
	keep       int // nodes to hold (less those retiring): what a replacement restores
	timeScale  float64
	maxRetries int

	jobs     map[string]job // trial -> its job, from queued until done or given up
	queue    []string
	last     placement.Placement
	nodes    []placement.Node
	occupied map[string]int // trial -> its launch holding GPUs (launching or running)
	// use is the GPUs the occupied trials hold (their slots in last), kept as gangs start and
	// end: placing the next gang and finding idle nodes read it instead of walking every gang.
	use *placement.Occupancy
	// ghosts says whether a gang may hold slots on a node neither held nor retiring (lost, not
	// yet released), known while ghostsKnown: such a stage places as withGhosts says.
	ghosts, ghostsKnown bool
	launches            map[int]string // launch -> trial, while in flight
	started             map[int]bool   // launches whose handle the loop holds
	// stopOnStart holds launches still starting when a node of theirs was lost: each is stopped
	// as soon as it starts (it cannot run on a node going away, and its GPUs must come free).
	stopOnStart map[int]bool
	timedOut    map[int]bool
	trialNode   map[string][]string // where each trial's last launch ran
	next        int                 // launches numbered from 1
	draining    map[string]bool     // lost nodes to release once no gang runs on them
	retiring    map[string]bool     // nodes past keep: no new gang goes there; released once none runs there
	more        bool                // the source may hand out more jobs
	ask         bool                // something ended since the source was last asked
	asking      bool                // an acWant is out
	cancelled   bool
	fault       *infra.Error // the infrastructure fault that paused the stage (it is cancelled too)
	// replacing counts the requests for replacements out: each node lost or noticed asks at
	// once, beside those out (the run counts their nodes as coming), as the model rents each
	// replacement at its own notice.
	replacing int
	over      bool
	// fresh says nodes are what refresh made of the view's nodes at generation seenGen: a step
	// need not ask for them again (a walk of every node and every placement, at every event).
	fresh   bool
	seenGen uint64

	// tiers is a hedged stage's (sim.StageAlloc.OnDemand, Proteus' reliability tiers); nil for
	// one market.
	tiers *tiers

	// doomed holds the launches training through their node's notice (launch -> node): stopped
	// once a replacement is up, to relaunch from their checkpoints, unless they end first.
	doomed map[int]string
	// moving holds the launches stopped to move off a doomed node: until they end, nothing else
	// is launched, so that the room they move to stays theirs.
	moving map[int]bool
	// stopAtReport holds the doomed launches to stop at their next report, once their
	// replacement is up: stopped then, they lose no part of an iteration.
	stopAtReport map[int]bool
	// restartOnNotice (cluster.spot.on_notice restart) keeps a doomed gang training until its
	// node goes, in case it gets done: stopped, it would lose the launch's work.
	restartOnNotice bool
}

// tiers is what a hedged stage's decisions know beyond an unhedged one's: which of its trials
// the plan puts on the on-demand nodes (critical: the chains with the extra wave, the longest),
// which nodes are on demand now, and which trials lost their node and wait to be relaunched.
type tiers struct {
	critical map[string]bool
	od       map[string]bool // node -> on demand (refresh)
	lostNode map[string]bool // trials queued again after their node was lost: they may move
	// moveFirst says an interrupted gang moves to free on-demand room rather than wait for a
	// replacement: the move starts it now, a replacement after its provisioning latency, so
	// moving ends sooner whenever that latency is above zero.
	moveFirst bool
	moved     []string // trials moved to on-demand room, in order (for tests and the log)
	// short says spot nodes were lost and not replaced yet: replaced once a gang finds no room.
	short bool
}

// newStage starts the decisions of jobs on nodes: parallel gangs of gpt GPUs at once, keep nodes
// held; more says a source hands out more jobs when asked.
func newStage(b, gpt, parallel, keep int, timeScale float64, maxRetries int, jobs []job, last placement.Placement, more bool) *stage {
	if last == nil {
		last = placement.Placement{}
	}
	s := &stage{b: b, gpt: gpt, parallel: parallel, keep: keep, timeScale: timeScale, maxRetries: maxRetries,
		jobs: map[string]job{}, last: last, occupied: map[string]int{}, use: placement.NewOccupancy(), launches: map[int]string{}, started: map[int]bool{}, stopOnStart: map[int]bool{},
		timedOut: map[int]bool{}, trialNode: map[string][]string{}, draining: map[string]bool{}, retiring: map[string]bool{},
		doomed: map[int]string{}, moving: map[int]bool{}, stopAtReport: map[int]bool{}, more: more, ask: more}
	s.add(jobs)
	return s
}

// add queues jobs.
func (s *stage) add(jobs []job) {
	for _, j := range jobs {
		s.jobs[j.trial] = j
		s.queue = append(s.queue, j.trial)
	}
}

// begin is the stage's first decision: launch what fits.
func (s *stage) begin(v stageView) []action {
	s.sync(v)
	return s.fill(v, nil)
}

// step decides what to do about e.
func (s *stage) step(v stageView, e stageEvent) []action {
	if s.over {
		return nil
	}
	s.sync(v)
	var out []action
	switch e.kind {
	case evCancel:
		if s.cancelled {
			return nil
		}
		out = append(out, s.stopAll()...)
	case evStarted:
		if _, ok := s.launches[e.launch]; !ok {
			return nil
		}
		s.started[e.launch] = true
		if s.cancelled || s.stopOnStart[e.launch] {
			delete(s.stopOnStart, e.launch)
			out = append(out, action{kind: acStop, launch: e.launch, trial: s.launches[e.launch]})
		}
	case evTimeout:
		t, ok := s.launches[e.launch]
		if !ok || !s.started[e.launch] || s.timedOut[e.launch] {
			return nil // it ended meanwhile
		}
		s.timedOut[e.launch] = true
		out = append(out, action{kind: acTimeout, trial: t, k: s.jobs[t].k, bracket: s.jobs[t].bracket, launch: e.launch},
			action{kind: acStop, trial: t, launch: e.launch})
	case evExited:
		s.free(e.launch)
		out = append(out, s.drain(false)...)
		out = append(out, s.retire()...)
	case evEnded:
		t := s.launches[e.launch]
		s.free(e.launch)
		timedOut := s.timedOut[e.launch]
		delete(s.launches, e.launch)
		delete(s.started, e.launch)
		delete(s.timedOut, e.launch)
		delete(s.doomed, e.launch)
		delete(s.moving, e.launch)
		delete(s.stopAtReport, e.launch)
		out = append(out, s.drain(false)...)
		out = append(out, s.retire()...)
		if s.cancelled {
			break
		}
		s.ask = s.more
		o := e.o
		o.trial = t
		if fault, ok := infra.Is(o.err); ok {
			// The disk, the store or the journal failed, not the trainer: no try is spent and
			// nothing more is launched; the other gangs stop at their checkpoints, and the stage
			// ends with the fault once they have (the run pauses).
			return s.fill(v, append(out, s.pause(fault)...))
		}
		if cause := s.judge(o, timedOut); cause != nil {
			// A gang may have failed because a node of it is gone or going: the provider says
			// which, before the try is judged the trial's failure.
			var doomed *gang.InterruptedError
			errors.As(o.err, &doomed)
			out = append(out, action{kind: acCheckNodes, trial: t, launch: e.launch, o: o, cause: cause, doomed: doomed})
			return out // the fill waits for the answer
		}
		out = append(out, action{kind: acDone, trial: t, k: s.jobs[t].k, bracket: s.jobs[t].bracket, o: o})
		delete(s.jobs, t)
	case evChecked:
		if e.err != nil {
			return append(out, s.end(e.err))
		}
		out = append(out, s.lose(v, e)...)
	case evReplaced:
		s.replacing--
		if s.cancelled {
			break // its error is the cancellation's
		}
		if e.err != nil {
			return append(out, s.end(e.err))
		}
		out = append(out, s.moveDoomed()...)
	case evNotice:
		if !s.cancelled {
			out = append(out, s.notice(v, e)...)
		}
	case evReported:
		if t := s.launches[e.launch]; s.stopAtReport[e.launch] && e.o.iter >= s.jobs[t].st.EndIter() {
			delete(s.stopAtReport, e.launch) // done: it ends by itself
		}
		if s.stopAtReport[e.launch] {
			delete(s.stopAtReport, e.launch)
			s.moving[e.launch] = true
			out = append(out, action{kind: acLog, text: fmt.Sprintf("trial %s: checkpointed on its doomed node: stopping its gang to relaunch it on the replacement\n", s.launches[e.launch])},
				action{kind: acStop, trial: s.launches[e.launch], launch: e.launch})
		}
	case evFault:
		if fault, ok := infra.Is(e.err); ok {
			out = append(out, s.pause(fault)...)
		}
	case evWork:
		s.asking, s.ask = false, false
		s.more = !e.exhausted
		s.add(e.jobs)
		out = append(out, s.resize(v, e.parallel, e.keep)...)
	}
	return s.fill(v, out)
}

// stopAll stops every gang that started and launches nothing more (the stage is cancelled):
// each saves its checkpoint, and those still starting are stopped once they start.
func (s *stage) stopAll() []action {
	s.cancelled = true
	var out []action
	for _, n := range s.sortedStarted() {
		out = append(out, action{kind: acStop, launch: n, trial: s.launches[n]})
	}
	return out
}

// pause stops the stage for an infrastructure fault: it ends with the first fault once its gangs
// have ended (their own faults, as the disk fills under them too, are not tries either).
func (s *stage) pause(fault *infra.Error) []action {
	if fault.What == infra.JournalBroken && !s.over {
		// Nothing is decided that the journal cannot hold: the stage ends now, its gangs left
		// to end with the driver (a resumed one reaps them).
		return []action{s.end(fault)}
	}
	if s.fault != nil || s.cancelled {
		return nil
	}
	s.fault = fault
	out := []action{{kind: acLog, text: fmt.Sprintf("%v: pausing (no try is spent); stopping the running gangs at their checkpoints\n", fault)}}
	return append(out, s.stopAll()...)
}

// lose acts on a failed launch once the provider said which nodes are gone: the loss is
// journaled, gangs still on those nodes are stopped (so that they save now), the nodes are
// released once no gang runs on them, the try is judged (a lost node's try is not the trial's
// failure) and replacements are asked for.
func (s *stage) lose(v stageView, e stageEvent) []action {
	var out []action
	o := e.o
	if len(e.lost) > 0 {
		out = append(out, action{kind: acForget, lost: e.lost})
		for id := range e.lost {
			s.draining[id] = true
			delete(s.retiring, id)
		}
		for _, t := range s.sortedOccupied() {
			n := s.occupied[t]
			if !onAny(s.last[t], e.lost) {
				continue
			}
			if !s.started[n] {
				s.stopOnStart[n] = true // launched a moment ago: stopped once it starts
				continue
			}
			out = append(out, action{kind: acLog, text: fmt.Sprintf("trial %s: its node %s is lost: stopping its gang to save its checkpoint\n", t, firstOn(s.last[t], e.lost))},
				action{kind: acStop, trial: t, launch: n})
		}
		out = append(out, s.drain(false)...)
	}
	interrupted := false
	for _, id := range s.trialNode[o.trial] {
		if _, gone := e.lost[id]; gone || !s.holds(id) {
			interrupted = true
		}
	}
	k, b := s.jobs[o.trial].k, s.jobs[o.trial].bracket
	_, fails, interrupts := v.tries(o.trial, k)
	retry := fails+1 <= s.maxRetries
	if interrupted {
		retry = interrupts+1 <= maxInterruptions
	}
	out = append(out, action{kind: acFail, trial: o.trial, k: k, bracket: b, o: o, cause: e.cause, interrupted: interrupted, retry: retry})
	if retry && interrupted {
		// Its relaunch comes first: the replacement (or the standby room) is for it, not for a
		// trial not begun, as the model has an interrupted gang go on on its own slot.
		if s.tiers != nil {
			s.tiers.lostNode[o.trial] = true
		}
		s.queue = append([]string{o.trial}, s.queue...)
	} else if retry {
		s.queue = append(s.queue, o.trial)
	} else {
		delete(s.jobs, o.trial)
	}
	if len(e.lost) > 0 {
		var left []cloud.Node
		for _, n := range v.nodes() {
			if _, gone := e.lost[n.ID]; !gone {
				left = append(left, n)
			}
		}
		s.refresh(left, e.lost)
		if s.tiers == nil {
			out = append(out, s.restore()...)
		} else {
			// A hedged stage replaces a lost spot node only once a gang finds no room (fill): its
			// gangs move to the on-demand room, and a replacement nobody needs would bill idle
			// (the simulator neither replaces nor bills a node whose gangs all moved).
			s.tiers.short = true
		}
	}
	return out
}

// notice acts on node e.node's interruption notice (sim.Spot.Notice): the node is journaled
// as being interrupted (it bills until released) and takes no new gang; a gang launched there a
// moment ago is stopped as soon as it starts; the gangs running there train on (doomed) while a
// replacement is asked for now, and move to it once it is up (moveDoomed), unless they end
// first or the node goes (then they are relaunched as after any lost node). A hedged stage with
// free room for them (the on-demand standby room, or spare spot nodes) moves them there at their
// next checkpoint instead, as after a loss. A node noticed with nothing on it is released now,
// and replaced only while the stage has work waiting.
func (s *stage) notice(v stageView, e stageEvent) []action {
	if !s.holds(e.node) {
		return nil // not this stage's, or lost already
	}
	lost := lostSet{e.node: {why: e.why, held: true}}
	out := []action{{kind: acForget, lost: lost}}
	s.draining[e.node] = true
	delete(s.retiring, e.node)
	var doomed []string
	used := false // a gang holds GPUs there: the stage needs a replacement
	for _, t := range s.sortedOccupied() {
		n := s.occupied[t]
		if !onAny(s.last[t], lost) {
			continue
		}
		used = true
		if !s.started[n] {
			s.stopOnStart[n] = true
			continue
		}
		doomed = append(doomed, t)
	}
	var left []cloud.Node
	for _, n := range v.nodes() {
		if n.ID != e.node {
			left = append(left, n)
		}
	}
	s.refresh(left, lost)
	if len(doomed) > 0 && s.tiers != nil && s.tiers.moveFirst && s.fit(doomed) == len(doomed) {
		for _, t := range doomed {
			n := s.occupied[t]
			if !s.restartOnNotice {
				s.stopAtReport[n] = true
				out = append(out, action{kind: acLog, text: fmt.Sprintf("trial %s: its node %s is being interrupted: stopping its gang at its next checkpoint to move it to free on-demand room\n", t, e.node)},
					action{kind: acStopAtReport, trial: t, launch: n})
			}
		}
		s.tiers.short = true // replaced once a gang finds no room, as after a loss
		return append(out, s.drain(false)...)
	}
	for _, t := range doomed {
		s.doomed[s.occupied[t]] = e.node
	}
	if len(doomed) > 0 {
		out = append(out, action{kind: acLog, text: fmt.Sprintf("trial(s) %s: node %s is being interrupted (%s): training on until its replacement is up or it goes\n", strings.Join(doomed, ", "), e.node, e.why)})
	}
	out = append(out, s.drain(false)...)
	if used || len(s.queue) > 0 || s.more || len(s.doomed) > 0 {
		out = append(out, s.restore()...)
	}
	return out
}

// fit is how many of trials' running gangs, in order, the free GPUs hold beside the others
// (each leaving its own GPUs, those on nodes kept too): on-demand or spot, as the model counts
// spare spot nodes as standby room (its relaunch is placed as any, the on-demand room first).
func (s *stage) fit(trials []string) int {
	held := placement.Placement{} // room held for the gangs before, until all are counted
	defer func() {
		for room, slots := range held {
			s.use.Release(room, slots)
		}
	}()
	for i, t := range trials {
		room := t + "\x00moving"
		s.use.Release(t, s.last[t])
		slots, ok := s.use.Place(placement.Request{Trial: room, GPUs: s.gpt}, nil)
		s.use.Hold(t, s.last[t])
		if !ok {
			return i
		}
		s.use.Hold(room, slots)
		held[room] = slots
	}
	return len(trials)
}

// moveDoomed stops the gangs training through their node's notice once a replacement is up,
// the earliest launched first, as many as the free GPUs hold (the others go on until the next
// replacement, as each node's own replacement does in the model), each at its next report (its
// checkpoint: stopped between two, it would lose the iteration under way); each is relaunched
// first (lose), on the room it stopped for. With restartOnNotice they train on until their node
// goes.
func (s *stage) moveDoomed() []action {
	if len(s.doomed) == 0 || s.restartOnNotice {
		return nil
	}
	launches := slices.Sorted(maps.Keys(s.doomed))
	trials := make([]string, len(launches))
	for i, n := range launches {
		trials[i] = s.launches[n]
	}
	var out []action
	for i, n := range launches[:s.fit(trials)] {
		out = append(out, action{kind: acLog, text: fmt.Sprintf("trial %s: a replacement for its node %s is up: stopping its gang at its next checkpoint to relaunch it there\n", trials[i], s.doomed[n])},
			action{kind: acStopAtReport, trial: trials[i], launch: n})
		s.stopAtReport[n] = true
		delete(s.doomed, n)
	}
	return out
}

// fill launches queued trials while GPUs allow, then says whether the stage is over.
func (s *stage) fill(v stageView, out []action) []action {
	if s.over {
		return out
	}
	for !s.cancelled && len(s.moving) == 0 && len(s.queue) > 0 && len(s.occupied) < s.parallel {
		id := s.queue[0]
		slots, placed, moved := s.placeNext(id)
		if !placed {
			if s.tiers != nil && s.tiers.short {
				s.tiers.short = false // a gang finds no room: the lost nodes are replaced now
				out = append(out, s.restore()...)
			}
			break // wait for a gang to finish, or a replacement node
		}
		if moved {
			s.tiers.moved = append(s.tiers.moved, id)
			out = append(out, action{kind: acLog, text: fmt.Sprintf("trial %s: its spot node was lost: moving its gang to free on-demand room %v rather than wait for a replacement\n", id, slotNodes(slots))})
		}
		if s.tiers != nil {
			delete(s.tiers.lostNode, id)
		}
		s.last[id] = slots
		s.queue = s.queue[1:]
		s.next++
		s.occupied[id] = s.next
		s.use.Hold(id, slots)
		s.launches[s.next] = id
		s.trialNode[id] = slotNodes(slots)
		j := s.jobs[id]
		launches, _, _ := v.tries(id, j.k)
		out = append(out, action{kind: acLaunch, trial: id, k: j.k, bracket: j.bracket, job: j, launch: s.next, try: launches + 1, slots: slots})
	}
	if s.more && s.ask && !s.asking && !s.cancelled {
		s.asking = true
		return append(out, action{kind: acWant, free: s.parallel - len(s.occupied) - len(s.queue)})
	}
	if len(s.launches) == 0 && s.replacing == 0 && !s.asking {
		switch {
		case len(s.queue) > 0 && !s.cancelled && len(s.nodes)+len(s.retiring) < s.keep:
			// Nodes noticed idle were not replaced, and a gang lost since needs their room.
			return append(out, s.restore()...)
		case len(s.queue) > 0 && !s.cancelled:
			j := s.jobs[s.queue[0]]
			return append(out, s.end(fmt.Errorf("run: bracket %d stage %d: a gang of %d GPUs does not fit on %d nodes", s.b, j.k+1, s.gpt, len(s.nodes))))
		case s.more && !s.cancelled:
			return append(out, s.end(fmt.Errorf("run: bracket %d: nothing runs, and the source of jobs has more it does not hand out", s.b)))
		}
		if s.fault != nil {
			return append(out, s.end(s.fault))
		}
		return append(out, s.end(nil))
	}
	return out
}

// placeNext places trial id's gang beside the running ones, and says whether it could (moved:
// to free on-demand room). A stage of one market with no gang on a lost node places it on the
// occupancy kept (placement.Occupancy: what PlacePinned says, without walking every gang); the
// others as place says.
func (s *stage) placeNext(id string) (slots []placement.Slot, placed, moved bool) {
	if (s.tiers == nil || len(s.tiers.od) == 0) && !s.mayHaveGhosts() {
		slots, placed = s.use.Place(placement.Request{Trial: id, GPUs: s.gpt}, s.last[id])
		return slots, placed, false
	}
	var reqs []placement.Request
	pinned := map[string]bool{}
	for _, t := range s.sortedOccupied() { // running gangs keep their GPUs, first
		if s.onRetiring(t) {
			continue // its GPUs are not among the nodes placed on; its slots stay as they are
		}
		reqs = append(reqs, placement.Request{Trial: t, GPUs: s.gpt})
		pinned[t] = true
	}
	reqs = append(reqs, placement.Request{Trial: id, GPUs: s.gpt})
	nodes, ghosts := s.withGhosts(pinned)
	p, unplaced, moved := s.place(id, nodes, reqs, pinned)
	if len(unplaced) > 0 || onGhost(p[id], ghosts) {
		return nil, false, false
	}
	return p[id], true, moved
}

// mayHaveGhosts says whether a gang holds slots on a node that is neither held nor retiring: one
// lost, whose gangs withGhosts keeps their slots on.
func (s *stage) mayHaveGhosts() bool {
	if s.ghostsKnown {
		return s.ghosts
	}
	listed := map[string]bool{}
	for _, n := range s.nodes {
		listed[n.ID] = true
	}
	s.ghosts = false
	for id := range s.use.Gangs() {
		if !listed[id] && !s.retiring[id] {
			s.ghosts = true
			break
		}
	}
	s.ghostsKnown = true
	return s.ghosts
}

// place places trial id beside the running gangs (pinned; reqs asks for them all, id last). A
// hedged stage's gang that lost its spot node moves to free on-demand room first
// (placement.MoveToOnDemand: displacing nobody), when moving ends sooner than waiting for a
// replacement (tiers.moveFirst); otherwise its trials go on their tiers (placement.PlaceTiered:
// the critical ones on demand, the others on spot; a running gang counts in the tier it runs
// on, so that it stays). A placement that would move a running gang is not taken: the stage
// places as an unhedged one does then (placement.PlacePinned), which never moves one. moved
// says the gang moved to on-demand room.
func (s *stage) place(id string, nodes []placement.Node, reqs []placement.Request, pinned map[string]bool) (placement.Placement, []string, bool) {
	t := s.tiers
	if t == nil || len(t.od) == 0 {
		p, unplaced := placement.PlacePinned(nodes, reqs, s.last, pinned)
		return p, unplaced, false
	}
	running := placement.Placement{}
	for tr := range pinned {
		running[tr] = s.last[tr]
	}
	if t.lostNode[id] && t.moveFirst {
		if p, ok := placement.MoveToOnDemand(nodes, t.od, running, id, s.gpt); ok {
			return p, nil, true
		}
	}
	critical := map[string]bool{}
	for _, r := range reqs {
		if pinned[r.Trial] {
			critical[r.Trial] = allOn(s.last[r.Trial], t.od)
		} else {
			critical[r.Trial] = t.critical[r.Trial]
		}
	}
	p, unplaced := placement.PlaceTiered(nodes, t.od, reqs, critical, s.last)
	if len(unplaced) == 0 && keeps(p, running) {
		return p, nil, false
	}
	p, unplaced = placement.PlacePinned(nodes, reqs, s.last, pinned)
	return p, unplaced, false
}

// withGhosts is the nodes to place on: those the stage holds, and a ghost of each node a running
// gang (pinned) still has slots on though it is lost or going (a gang launched a moment before
// its node's loss, stopped once it starts). Without the ghost the gang's slots are not all there,
// the placement would move it, and its GPUs on the nodes still held would look free: another
// gang was given them (a virtual run at 5 interruptions per node-hour caught it). No gang is
// placed on a ghost (onGhost).
func (s *stage) withGhosts(pinned map[string]bool) ([]placement.Node, map[string]bool) {
	held := map[string]bool{}
	for _, n := range s.nodes {
		held[n.ID] = true
	}
	size := map[string]int{}
	for _, t := range slices.Sorted(maps.Keys(pinned)) {
		for _, sl := range s.last[t] {
			if held[sl.Node] {
				continue
			}
			for _, g := range sl.GPUs {
				size[sl.Node] = max(size[sl.Node], g+1)
			}
		}
	}
	if len(size) == 0 {
		return s.nodes, nil
	}
	nodes := slices.Clone(s.nodes)
	ghosts := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(size)) {
		nodes = append(nodes, placement.Node{ID: id, GPUs: size[id]})
		ghosts[id] = true
	}
	return nodes, ghosts
}

// onGhost says whether any slot is on a ghost node (withGhosts).
func onGhost(slots []placement.Slot, ghosts map[string]bool) bool {
	for _, sl := range slots {
		if ghosts[sl.Node] {
			return true
		}
	}
	return false
}

// allOn says whether every slot is on one of nodes.
func allOn(slots []placement.Slot, nodes map[string]bool) bool {
	for _, sl := range slots {
		if !nodes[sl.Node] {
			return false
		}
	}
	return len(slots) > 0
}

// keeps says whether p leaves every gang of running where it runs.
func keeps(p, running placement.Placement) bool {
	for t, slots := range running {
		got := p[t]
		if len(got) != len(slots) {
			return false
		}
		for i := range slots {
			if got[i].Node != slots[i].Node || !slices.Equal(got[i].GPUs, slots[i].GPUs) {
				return false
			}
		}
	}
	return true
}

// resize takes the source's parallelism and nodes to hold: nodes past keep retire, the least
// busy first (ties by ID), and those no gang runs on go now (the simulator's scale-down: idle
// nodes at once, busy ones as their gangs end). Below keep (a schedule revised up), nodes still
// retiring are kept again first, and the rest are asked for.
func (s *stage) resize(v stageView, parallel, keep int) []action {
	s.parallel, s.keep = parallel, keep
	if len(s.nodes) < keep {
		for _, id := range slices.Sorted(maps.Keys(s.retiring)) {
			if len(s.nodes) >= keep {
				break
			}
			delete(s.retiring, id)
			s.refresh(v.nodes(), nil)
		}
		if len(s.nodes) >= keep {
			return nil
		}
		return s.restore()
	}
	busy := s.gangsOn()
	nodes := slices.Clone(s.nodes)
	slices.SortStableFunc(nodes, func(a, b placement.Node) int {
		if c := busy[a.ID] - busy[b.ID]; c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, n := range nodes[:max(0, len(nodes)-keep)] {
		s.retiring[n.ID] = true
	}
	s.nodes = slices.DeleteFunc(s.nodes, func(n placement.Node) bool { return s.retiring[n.ID] })
	s.use.SetNodes(s.nodes)
	s.ghostsKnown = false
	return s.retire()
}

// onRetiring says whether trial t's gang holds GPUs on a node that is retiring: a node released
// once no gang runs there, so the gang's slots must keep saying where it runs.
func (s *stage) onRetiring(t string) bool {
	for _, sl := range s.last[t] {
		if s.retiring[sl.Node] {
			return true
		}
	}
	return false
}

// retire releases the retiring nodes no gang runs on any more.
func (s *stage) retire() []action { return s.letGo(s.retiring, false, acRetire) }

// gangsOn counts the stage's gangs (launching or running) on each node.
func (s *stage) gangsOn() map[string]int { return s.use.Gangs() }

// letGo takes the nodes of set that no gang runs on (all of them, with all) out of it, and asks
// the loop to release them (kind).
func (s *stage) letGo(set map[string]bool, all bool, kind actionKind) []action {
	if len(set) == 0 {
		return nil
	}
	s.ghostsKnown = false // retiring nodes let go are neither held nor retiring now
	busy := map[string]int{}
	if !all {
		busy = s.gangsOn()
	}
	var ids []string
	for id := range set {
		if busy[id] == 0 {
			ids = append(ids, id)
			delete(set, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return []action{{kind: kind, nodes: ids}}
}

// end closes the stage: whatever is still draining is released, whatever way it ended.
func (s *stage) end(err error) action {
	s.over = true
	return action{kind: acEnd, err: err, nodes: s.drainAll()}
}

// restore asks for nodes up to keep, beside those retiring (still held until their gangs end),
// now: the nodes of the requests out count as coming (run.scale), so it asks only for those
// missing since.
func (s *stage) restore() []action {
	s.replacing++
	return []action{{kind: acReplace, count: s.keep + len(s.retiring)}}
}

// judge says why a launch that ended is not done, or nil when it reached the stage's target.
func (s *stage) judge(o outcome, timedOut bool) error {
	j := s.jobs[o.trial]
	target := j.st.EndIter()
	switch {
	case o.err == nil && o.iter >= target:
		return nil // reached, even if its budget ran out as it ended
	case timedOut:
		spec := time.Duration(float64(j.budget) / s.timeScale)
		return fmt.Errorf("timed out: still running after its budget of %s (spec time %s); stopped", j.budget.Round(time.Millisecond), spec.Round(time.Second))
	case errors.Is(o.err, gang.ErrStopped):
		return fmt.Errorf("stopped at iteration %d, short of the target %d: relaunched from its checkpoint", o.iter, target)
	case o.err != nil:
		return o.err
	default:
		// Exit 0 means the target was reached; short of it the gang was interrupted (a trainer
		// that exits 0 on SIGTERM): it is relaunched from its checkpoint.
		return fmt.Errorf("exited 0 at iteration %d, short of the target %d: interrupted, not done", o.iter, target)
	}
}

// free forgets that launch n holds GPUs.
func (s *stage) free(n int) {
	if t, ok := s.launches[n]; ok && s.occupied[t] == n {
		delete(s.occupied, t)
		s.use.Release(t, s.last[t])
		if s.ghosts {
			s.ghostsKnown = false // it may have been the gang on a lost node
		}
	}
}

// drain releases the lost nodes no gang of the stage runs on any more.
func (s *stage) drain(all bool) []action { return s.letGo(s.draining, all, acRelease) }

func (s *stage) drainAll() []string {
	if a := s.drain(true); len(a) > 0 {
		return a[0].nodes
	}
	return nil
}

// sync refreshes the stage's nodes from the view when they changed since it last did.
func (s *stage) sync(v stageView) {
	if gen := v.nodesGen(); !s.fresh || gen != s.seenGen {
		s.refresh(v.nodes(), nil)
		s.fresh, s.seenGen = true, gen
	}
}

// refresh places on the nodes the bracket holds now (less gone, just lost, and those retiring): a
// trial that is not running forgets slots on nodes that are no longer there.
func (s *stage) refresh(nodes []cloud.Node, gone lostSet) {
	s.fresh = false // refreshed from other nodes than the view's, or from them: sync says
	s.ghostsKnown = false
	held := map[string]bool{}
	s.nodes = s.nodes[:0]
	if s.tiers != nil {
		s.tiers.od = map[string]bool{}
	}
	for _, n := range nodes {
		if _, lost := gone[n.ID]; lost || s.retiring[n.ID] {
			continue
		}
		held[n.ID] = true
		s.nodes = append(s.nodes, placement.Node{ID: n.ID, GPUs: n.GPUs})
		if s.tiers != nil && n.Market == cloud.OnDemand {
			s.tiers.od[n.ID] = true
		}
	}
	for t, slots := range s.last {
		if _, running := s.occupied[t]; running {
			continue
		}
		for _, sl := range slots {
			if !held[sl.Node] {
				delete(s.last, t)
				break
			}
		}
	}
	s.use.SetNodes(s.nodes)
}

func (s *stage) holds(id string) bool {
	if s.retiring[id] {
		return true
	}
	for _, n := range s.nodes {
		if n.ID == id {
			return true
		}
	}
	return false
}

func (s *stage) sortedOccupied() []string {
	out := make([]string, 0, len(s.occupied))
	for t := range s.occupied {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (s *stage) sortedStarted() []int {
	out := make([]int, 0, len(s.started))
	for n := range s.started {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

func onAny(slots []placement.Slot, nodes lostSet) bool {
	return firstOn(slots, nodes) != ""
}

func firstOn(slots []placement.Slot, nodes lostSet) string {
	for _, sl := range slots {
		if _, ok := nodes[sl.Node]; ok {
			return sl.Node
		}
	}
	return ""
}
