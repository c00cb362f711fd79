// Package starter writes the spec a new user starts from (`rubberband init`): the trainer's
// command (the one Python script of a folder, or the command given), an instance type of the
// catalog with its GPUs, price and typical start-up latencies filled in and marked as the
// catalog's defaults, a search space skeleton showing each kind of distribution, Successive
// Halving with Hyperband and ASHA in comments, and a deadline to edit. It has no profile:
// `rubberband profile` measures one and names it in the spec (AddProfileFile), since a first
// run must never rest on invented latencies.
//
// Everything but FindScript and AddProfileFile is pure: text in, text out.
package starter
