package executor

import (
	"context"
	"fmt"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// Cancel marks a run cancelled, from its journal (cfg.Past): the gangs any driver left are
// ended (when the runtime is a Reaper), every node the journal or the provider knows of is
// released and journaled, then the cancel event. It is what `rubberband cancel` does when no
// driver is alive, and what a driver does when it was stopped by a cancel; doing it twice is
// harmless. A resumed run refuses a cancelled run unless Config.Force.
func Cancel(ctx context.Context, cfg Config, why string) error {
	x, err := newRun(cfg)
	if err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	if reaper, ok := cfg.Runtime.(gang.Reaper); ok {
		if err := reaper.Reap(ctx); err != nil {
			return fmt.Errorf("cancel: end the run's gangs: %w", err)
		}
	}
	if err := x.releaseAll(ctx, why); err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	if x.st.Finished {
		return nil // nothing left to cancel: the run had finished
	}
	return x.record(journal.Event{Ev: journal.EvCancel, Error: why}, true)
}
