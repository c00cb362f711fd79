// Package meter prices what a run held, and splits the price among its stages. It is the one
// cost rule of rubberband: the simulator bills each sampled timeline with it and the executor
// bills the realized one, so that a prediction and a run compare stage by stage.
//
// Inputs are billing Rules, node spans (a node running from some time until released, at its
// own price per second), launch spans (one TRAIN launch's GPUs from start to end, at a price
// per GPU-second) and each bracket's stage windows (a stage's start and its SYNC). All times
// are float seconds on one clock; the package reads no clock and does no I/O.
//
// What is billed. Per-instance: each node pays its running time rounded up to the increment and
// raised to the minimum, at its price; launches pay nothing. Per-function: each launch pays its
// GPUs times its duration, rounded likewise, at its price; nodes pay no time. Under both models
// each node pays the data cost once (the dataset it downloads when new).
//
// How it is split: every cost goes to exactly one stage, so the stages add up to the total.
//
//   - A bracket's stages cut its clock into consecutive pieces: stage k owns the time from its
//     start to the next stage's start, i.e. its window and the gap after its SYNC (ranking,
//     promoting, releasing nodes). The first stage also owns everything before its start, the
//     last stage everything after its start, its SYNC included.
//   - A node's unrounded time (seconds times price) goes to the pieces it overlaps.
//   - Its rounding (billed minus unrounded: increment and minimum) goes to the stage in which it
//     is released. An instant that ends a piece ends that stage: a node released exactly at a
//     SYNC that the next stage starts at belongs to the stage that SYNC ends.
//   - Its data cost goes to the stage in which it started running, and a launch's whole cost to
//     the stage in which it started. An instant that begins a piece begins that stage: a node
//     running from exactly the next stage's start belongs to the next stage.
package meter
