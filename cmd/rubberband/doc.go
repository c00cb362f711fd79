// Command rubberband plans, simulates and runs cost-aware elastic hyperparameter tuning jobs:
// validate, plan, simulate and whatif predict a spec's time and cost; run, resume, cancel,
// list, status, logs, report and ui run a plan on the local, nomad or ec2 backend and show
// it; profile measures a trainer, prices and cleanup talk to EC2; schema and completion help
// editors and shells. The hidden trainer, worker and node-agent commands are what runs on the
// nodes. This package is wiring: each file is a command's flags, its output, and calls into
// the packages that do the work (planner, driver, rundir, executor/worker, ...). Its tests here
// are of its own functions; the end-to-end tests, through the built binary, are package e2e.
//
// Exit codes: 0 ok; 1 failed; 2 bad input (spec, flag, command, a run that does not exist);
// 3 no plan meets the deadline at the spec's quantile, or the budget (plan, simulate, run);
// 4 the run paused on an infrastructure fault (a full disk, a checkpoint store down): resume it
// once that is mended.
package main
