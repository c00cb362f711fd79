package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// TeamChange is what an admin changes of a team: only the fields given (non-nil); the others
// keep their values.
type TeamChange struct {
	// Name, when given, must be the team's (the path names it): a body that names another
	// team is refused rather than applied to this one.
	Name             string   `json:"name,omitempty"`
	MaxGPUs          *int     `json:"max_gpus,omitempty"`
	MaxNodes         *int     `json:"max_nodes,omitempty"`
	MonthlyBudgetUSD *float64 `json:"monthly_budget_usd,omitempty"`
	MaxQueuedRuns    *int     `json:"max_queued_runs,omitempty"`
	// StoragePrefixes replaces the team's prefixes when given ([] removes them all).
	StoragePrefixes *[]string `json:"storage_prefixes,omitempty"`
}

// Apply is t with c's fields.
func (c TeamChange) Apply(t store.Team) store.Team {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&t.MaxGPUs, c.MaxGPUs)
	set(&t.MaxNodes, c.MaxNodes)
	set(&t.MaxQueuedRuns, c.MaxQueuedRuns)
	if c.MonthlyBudgetUSD != nil {
		t.MonthlyBudgetUSD = *c.MonthlyBudgetUSD
	}
	if c.StoragePrefixes != nil {
		t.StoragePrefixes = *c.StoragePrefixes
	}
	return t
}

// CreateTeam adds a team and audits it as by's action (an admin's name, or the CLI's user),
// shown to the new team. What the caller must change is an *InputError.
func CreateTeam(ctx context.Context, st store.Store, t store.Team, by string) error {
	if err := CheckTeam(t); err != nil {
		return &InputError{Err: err}
	}
	if err := st.CreateTeam(ctx, t); err != nil {
		return err
	}
	return audit(ctx, st, by, t.Name, "team-create", t.Name, TeamDetail(t))
}

// UpdateTeam changes what c gives of the team's limits, keeps the rest, and audits it as by's
// action, shown to the team: its limits before and after.
func UpdateTeam(ctx context.Context, st store.Store, name string, c TeamChange, by string) (store.Team, error) {
	if c.Name != "" && c.Name != name {
		return store.Team{}, &InputError{Err: fmt.Errorf("the body names team %q, the path %q", c.Name, name)}
	}
	before, err := st.Team(ctx, name)
	if err != nil {
		return store.Team{}, err
	}
	t := c.Apply(before)
	if err := CheckTeam(t); err != nil {
		return store.Team{}, &InputError{Err: err}
	}
	if err := st.UpdateTeam(ctx, t); err != nil {
		return store.Team{}, err
	}
	return t, audit(ctx, st, by, name, "team-update", name, TeamDetail(before)+" -> "+TeamDetail(t))
}

// TeamDetail says a team's limits, for messages and the audit log.
func TeamDetail(t store.Team) string {
	d := fmt.Sprintf("max_gpus %d, max_nodes %d, monthly budget %s, max_queued_runs %d", t.MaxGPUs, t.MaxNodes, format.Money(t.MonthlyBudgetUSD), t.MaxQueuedRuns)
	if len(t.StoragePrefixes) > 0 {
		d += ", storage prefixes " + strings.Join(t.StoragePrefixes, " ")
	}
	return d
}

// CheckTeam checks a team's name, limits and storage prefixes.
func CheckTeam(t store.Team) error {
	switch {
	case !validName(t.Name):
		return fmt.Errorf("team name %q: 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit", t.Name)
	case t.MaxGPUs < 0 || t.MaxNodes < 0 || t.MonthlyBudgetUSD < 0 || t.MaxQueuedRuns < 0:
		return fmt.Errorf("team %s: max_gpus, max_nodes, monthly_budget_usd and max_queued_runs must not be negative", t.Name)
	case len(t.StoragePrefixes) > store.MaxStoragePrefixes:
		return fmt.Errorf("team %s: %d storage prefixes, over %d", t.Name, len(t.StoragePrefixes), store.MaxStoragePrefixes)
	}
	for _, p := range t.StoragePrefixes {
		if err := CheckStoragePrefix(p); err != nil {
			return fmt.Errorf("team %s: %w", t.Name, err)
		}
	}
	return nil
}

// audit records by's action, shown to team.
func audit(ctx context.Context, st store.Store, by, team, action, target, detail string) error {
	err := st.AddAudit(context.WithoutCancel(ctx), store.AuditEntry{User: by, Team: team, Action: action, Target: target, Detail: detail})
	if err != nil {
		return fmt.Errorf("%s %s is done, but not in the audit log: %w", action, target, err)
	}
	return nil
}
