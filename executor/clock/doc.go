// Package clock is the run path's time. Everything in it that waits (the executor, its fakes,
// the virtual backend, the local provider's emulated latencies) asks a Clock: Now, Sleep (or
// SleepBackground, for an actor that only watches: it never keeps virtual time going),
// AfterFunc, and Go to start a concurrent actor; actors talk through a Queue and follow a
// runtime's channels with Recv. Wall is the real clock. Sim is a discrete-event clock: it runs
// one actor at a time, in an order that depends only on what the actors did (never on the Go
// scheduler), and advances virtual time to the next timer only when every actor it drives is
// blocked on it — so a run in virtual time is as fast as its decisions and a function of its
// inputs. An actor must block only through this package (Sleep, Queue.Get, Recv) while it runs
// under a Sim, and never while it holds a lock another actor may take.
package clock
