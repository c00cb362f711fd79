// Command rubberband plans, simulates and (in later releases) runs cost-aware elastic
// hyperparameter tuning jobs. One file per subcommand; this package builds the real inputs
// (spec files, plan files) and passes them to the pure packages.
//
// Exit codes: 0 success, 1 error, 2 invalid spec or arguments, 3 no plan meets the deadline.
package main
