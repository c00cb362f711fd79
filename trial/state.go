package trial

import "fmt"

// State is where a trial is in its life cycle.
type State string

const (
	// Pending trials wait to be launched for the current stage (again, after a failed try).
	Pending State = "pending"
	// Running trials have their gang of workers up.
	Running State = "running"
	// Paused trials reached the stage's target iteration and wait for the sync.
	Paused State = "paused"
	// Promoted trials survived a sync and wait for the next stage.
	Promoted State = "promoted"
	// Stopped trials were cut at a sync, or finished the last stage: they are done.
	Stopped State = "stopped"
	// Failed trials ran out of retries; the stage goes on without them.
	Failed State = "failed"
)

// Event is something that happens to a trial.
type Event string

const (
	// Launch: the trial's gang was started.
	Launch Event = "launch"
	// Reached: the trainer exited 0 at the target iteration.
	Reached Event = "reached"
	// Crashed: a worker died or exited non-zero, and a retry is left.
	Crashed Event = "crashed"
	// GaveUp: a worker died and no retry is left.
	GaveUp Event = "gave-up"
	// Interrupted: the driver stopped the gang on purpose (migration, shutdown); it is relaunched.
	Interrupted Event = "interrupted"
	// Promote: the sync keeps the trial.
	Promote Event = "promote"
	// Cut: the sync drops the trial, or the job is over.
	Cut Event = "cut"
)

// Transition returns the state a trial moves to, or an error when the event makes no sense in
// that state (which is a driver bug, never a trainer's doing). This switch is the whole machine.
func Transition(s State, e Event) (State, error) {
	switch {
	case (s == Pending || s == Promoted) && e == Launch:
		return Running, nil
	case (s == Pending || s == Promoted || s == Paused) && e == Cut:
		return Stopped, nil
	case s == Running && e == Reached:
		return Paused, nil
	case s == Running && (e == Crashed || e == Interrupted):
		return Pending, nil
	case s == Running && e == GaveUp:
		return Failed, nil
	case s == Paused && e == Promote:
		return Promoted, nil
	}
	return s, fmt.Errorf("trial: no transition from %s on %s", s, e)
}

// Done reports whether a state is final.
func (s State) Done() bool { return s == Stopped || s == Failed }
