// Package gang is the contract between the executor and its runtimes: a Gang (one TRAIN run of
// a trial, all its workers started together or not at all), the Runtime that launches it, the
// Handle that follows it, and the errors a runtime answers with (ErrUnplaceable, ErrStopped,
// *InterruptedError). BuildGang lays a trial's workers out on placement's slots. Runtimes
// (executor/process, executor/nomad, executor/virtual, executor/fake) import this package and
// cloud, never the engine; gang/gangtest is the contract as a test suite. It imports only leaf
// packages (cloud, placement, spec, trial).
package gang
