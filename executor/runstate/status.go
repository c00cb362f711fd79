package runstate

import "time"

// Status is a progress snapshot of one bracket's current stage; of an ASHA run (Rungs), of its
// highest rung reached so far: Done results there, Total what the rung holds at the least.
type Status struct {
	Bracket       string
	Stage, Stages int
	Done, Total   int
	Failed        int
	// Running is the trials training now; Iters the iterations they and the finished ones
	// reported in this stage so far, of ItersTotal the stage trains in all (0: not known).
	Running, Iters, ItersTotal int
	// Starting is the nodes the stage waits for before its trials start (SCALE and INIT: a
	// cloud's minute or two, which a user would otherwise watch in silence).
	Starting int
	// Rungs says the stages are an ASHA run's rungs (no barrier: Done may pass Total).
	Rungs   bool
	Elapsed time.Duration // spec time since the run started
	Cost    float64       // dollars so far
	// Forecast is the latest re-plan's or review's forecast JCT (spec seconds from the start);
	// 0 before the first: the plan's prediction stands.
	Forecast float64
}
