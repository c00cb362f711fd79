// Package kube is the executor's Runtime on Kubernetes. A gang is one pod per worker, bound by
// spec.nodeName to the node placement chose (placement stays rubberband's, so a gang is whole or
// not started, and no scheduler is asked), labelled with its run, trial, gang and rank, asking
// for its GPUs as nvidia.com/gpu. Each pod runs trainer.command through the `rubberband worker`
// wrapper, which restores and saves the trial's checkpoint; the store's credentials reach it from
// the run's Secret, never the pod spec. Reports are read from rank 0's log through the API server
// (pods/log); a node deleted, NotReady or carrying a reclaim taint stops its gangs with their
// checkpoints saved and is reported as gang.InterruptedError. Config reads the cluster's
// credentials as kubectl does. The RBAC and quotas a run needs are package admit's.
package kube
