// Package trial owns what one trial is: its life cycle as a pure state machine, and the
// language-neutral contract between rubberband and a trainer — the environment every worker gets,
// the `@rb {json}` report lines rank 0 prints, and what exit codes and SIGTERM mean. Subpackage
// rbtrain is the same contract from the trainer's side, for trainers written in Go; builtin holds the
// trainers rubberband ships (the synthetic one that fidelity tests and virtual runs follow, an MLP).
package trial
