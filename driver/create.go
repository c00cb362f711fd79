package driver

import (
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A NewRun is a run about to be made: where its state goes, what the caller decided of it (Run:
// its ID, backend and time scale; a server's sandbox and code), the spec as parsed and the
// bytes it was parsed from, its plan, and the local instance catalog the spec was read with
// (nil: none to keep).
type NewRun struct {
	Dir     string
	Run     rundir.RunFile
	Source  *spec.Source
	Spec    *spec.Experiment
	Plan    *planner.Report
	Catalog *spec.CatalogFile
}

// Create is the one way a run is made, by `rubberband run` and by a server's submission. It
// checks again what no run may start without, whoever made the plan (run --plan takes one
// from a file): that its backend can run the spec (Check) and that the plan keeps to the spec's
// budget (planner.CheckBudget). Then it writes the state directory, made if missing (the caller
// holds its lock, or owns it alone): the catalog, the spec's snapshot, the plan, and run.json
// last (rundir.Create), with the spec's sample count and seed.
func Create(n NewRun) error {
	if err := Check(n.Run.Backend, n.Spec); err != nil {
		return err
	}
	if err := planner.CheckBudget(n.Spec, n.Plan); err != nil {
		return err
	}
	if err := rundir.Mkdir(n.Dir); err != nil {
		return err
	}
	if n.Catalog != nil { // the run keeps the catalog it was planned with
		if err := rundir.WriteCatalog(n.Dir, n.Catalog); err != nil {
			return err
		}
	}
	rf := n.Run
	rf.Samples, rf.Seed = n.Spec.Planner.Samples, n.Spec.Seed
	return rundir.Create(n.Dir, rf, n.Source, n.Spec, n.Plan)
}
