package journal

import "strings"

// Upgrade brings a record written by an older driver to the shape this one writes. Decoding
// applies it to every record read (ReadJournal, OpenJournal, Tail): it is the one place that
// knows old journals, so that no fold or reader handles an old record's words. A record in
// today's shape is returned unchanged.
//
//   - a fail whose Error is "gave up" (before GaveUp) gives up;
//   - a node_down or a stop without Cause (before causes) has the cause its Error says;
//   - a request's node count moves from Try (before Count) to Count;
//   - a paused stop's fault moves from Reason (before Fault) to Fault.
func Upgrade(e Event) Event {
	switch e.Ev {
	case EvFail:
		if e.Error == "gave up" {
			e.GaveUp = true
		}
	case EvNodeOff:
		if e.Cause == "" {
			e.Cause = string(legacyNodeCause(e.Error))
		}
	case EvStop:
		if e.Cause == "" {
			e.Cause = string(legacyStopCause(e.Error))
		}
		if e.Cause == string(StopPaused) && e.Fault == "" && e.Reason != "" {
			e.Fault, e.Reason = e.Reason, ""
		}
	case EvPhase:
		if e.Phase == 0 && e.Stage > 0 {
			e.Phase, e.Stage = e.Stage, 0
		}
	case EvRequest:
		if e.Count == 0 && e.Try > 0 {
			e.Count, e.Try = e.Try, 0
		}
	}
	return e
}

// legacyNodeCause is why nodes went by a node_down's words, as drivers before NodeCause said it.
func legacyNodeCause(why string) NodeCause {
	switch {
	case why == "lost":
		return NodeLost
	case strings.HasPrefix(why, "orphan"):
		return NodeOrphan
	}
	return NodeReleased
}

// legacyStopCause is why a driver stopped by a stop's words, as drivers before StopCause said it.
func legacyStopCause(why string) StopCause {
	switch {
	case why == "interrupted":
		return StopInterrupted
	case strings.HasPrefix(why, "budget:"):
		return StopBudget
	}
	return StopFailed
}
