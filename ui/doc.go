// Package ui is the local web dashboard of `rubberband ui`: a runs page (every run under the
// root, live), a run page (progress per stage, the planned and the realized schedule side by
// side, cost and time against the prediction, learning curves, every trial with its log's tail,
// the spec and the plan), and a plan page (a spec under the root or a pasted one: the plan's
// table and every planner's cost against the deadline, without running anything).
//
// It reads state directories only (package rundir), follows each watched run's journal
// incrementally (journal.Tail) and pushes the re-rendered sections to pages with Server-Sent
// Events. Everything is rendered by html/template on the server, so every string from a run
// (trial IDs, params, log lines) is escaped in one place; the page's small script only swaps
// sections in. Assets are embedded: it works offline. What it may do beyond reading (cancel,
// planning) is passed in by the caller, so that the dashboard calls the same code as the CLI;
// it does it only when asked from its own pages (same origin), and within bounds: planning
// within MaxPageSamples samples and Config.PlanTimeout, live streams within Config.MaxStreams
// in all and Config.MaxStreamsPerClient per client.
package ui
