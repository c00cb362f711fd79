// Package spotnotice carries a node's spot interruption notice from the node to the driver
// through the run's checkpoint store, for backends whose notice is seen on the node alone (EC2
// serves it on the instance's IMDS): the worker that sees it gives it (Give) and trains on; the
// driver's Source finds it (executor.Noticer) and trains through it, moving the node's gangs
// once a replacement is up. The store is the one the heartbeat and the checkpoints use: nothing
// new to reach, authorise or secure.
package spotnotice
