// Package virtual is the `virtual` backend: a cloud and its trainers that exist only in virtual
// time. A World holds nodes, gangs and checkpoints on a clock.Sim; node start-up, data, trainer
// start-up and iteration latencies, spot interruptions and persistent slow nodes are drawn from
// the spec's model (package sim) with the spec's seed, and gangs report the synthetic trainer's
// learning curves (trial/builtin/synthetic). Each driver sees the world through a Provider and a
// Runtime of its own; Sever cuts a driver off (it crashed) while the world goes on, so that the
// next driver resumes in the same world. Faults are seeded schedules of what goes wrong (driver
// crashes at journal records, torn writes, lost nodes, spot notices, launch failures, trainer
// crashes and hangs), and Run drives a whole run through them — the unchanged executor, resumed
// after each crash in the same command — in a fraction of a second of wall time. The world also
// keeps the ground truth a journal is checked against: what every node was billed, which gangs
// trained to which target, and any breach of the runtime contract by the driver.
package virtual
