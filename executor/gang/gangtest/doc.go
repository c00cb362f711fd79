// Package gangtest is the gang.Runtime contract as one test suite, run over every runtime
// (the process runtime in executor/process, the Nomad runtime against real Nomad agents in
// executor/nomad), as checkpoint/storetest is for stores: reports, all-or-nothing launches, a
// failure stopping the gang, stop then kill, checkpoints saved and restored, kept reports
// re-reported, every worker's output in the trial's log, unplaceable gangs. Its trainers are small
// /bin/sh scripts, so that every runtime runs the same ones.
package gangtest
