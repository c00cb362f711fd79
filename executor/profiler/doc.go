// Package profiler measures a trainer's scaling profile where it will run: at each GPU count it
// rents the nodes (or takes one virtual node of that many GPUs), lays out as many gangs of one
// typical trial side by side as fit on a node, the way a stage runs them (gang.BuildGang over
// gang.SpreadSlots), launches them through an gang.Runtime once to warm the nodes up and
// once to measure, and fits the seconds per iteration (mean and spread of the intervals between
// rank 0's reports) and the start-up of a TRAIN run (what a launch takes beyond its iterations).
// Run returns the profile; Write puts it in the profile file format the spec reads.
package profiler
