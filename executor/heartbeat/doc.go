// Package heartbeat lets workers that can outlive their driver (Nomad jobs, instances) notice
// that it is gone. The driver writes a beat into the run's checkpoint store, which every worker
// reaches already; the on-node wrapper watches it and stops its trainer (saving its checkpoint)
// once the beat has not changed for a timeout, measured on the worker's own clock so that clock
// skew between machines does not matter.
package heartbeat
