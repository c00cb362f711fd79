package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Submission is a spec sent to the server: its text, the files it names (profiles), by the names
// it gives them, and where the submitter read it from (for messages).
type Submission struct {
	Name     string            `json:"name"`
	Spec     string            `json:"spec"`
	Files    map[string]string `json:"files,omitempty"`
	Priority int               `json:"priority,omitempty"`
	// Code is the ID of the trainer's code bundle (package codebundle), uploaded first with PUT
	// /api/v1/code/{id}: the run's trainers run in it, unpacked. Without it they run in the
	// server's own folder (the built-in trainers need nothing else).
	Code string `json:"code,omitempty"`
}

// Limits on a submission.
const (
	MaxSpecBytes   = 1 << 20 // the spec and its files together
	MaxSpecFiles   = 64
	MaxPriority    = 1000
	MaxNameBytes   = 255 // a file name's
	planSamplesMax = 2000
)

// InputError is a submission the user must change: a spec with problems (Problems, each naming
// its field and line), a backend that cannot run it, a plan that misses its deadline.
type InputError struct {
	Err      error
	Problems []string `json:"problems,omitempty"`
	// Missing are the files the spec names that were not sent: a client sends them and submits
	// again.
	Missing []string `json:"missing_files,omitempty"`
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Submit plans a submission for user and queues it (state queued; the next step starts it when
// its team's quotas allow), or refuses it: an *InputError for a spec to change, a *Refusal over
// the team's budget, quotas or queue limits; admitted under the team's lock (store.Decide), so
// that concurrent submissions, to this server or another on its database, never together
// exceed them. Its checkpoints and warm starts must be where its team may keep data
// (CheckStorage). The plan is made for what the team may hold: the spec's max_nodes
// capped by the team's max_nodes and max_gpus.
func (s *Server) Submit(ctx context.Context, u store.User, sub Submission) (store.Run, *planner.Report, error) {
	st := s.cfg.Store
	size := len(sub.Spec)
	for name, f := range sub.Files {
		size += len(name) + len(f)
	}
	switch {
	case size > MaxSpecBytes:
		return store.Run{}, nil, &InputError{Err: fmt.Errorf("the spec and its files hold %d bytes, over %d", size, MaxSpecBytes)}
	case len(sub.Name) > MaxNameBytes:
		return store.Run{}, nil, &InputError{Err: fmt.Errorf("name: %d bytes, over %d: the spec file's name, not its text", len(sub.Name), MaxNameBytes)}
	case len(sub.Files) > MaxSpecFiles:
		return store.Run{}, nil, &InputError{Err: fmt.Errorf("%d files, over %d", len(sub.Files), MaxSpecFiles)}
	case sub.Priority < -MaxPriority || sub.Priority > MaxPriority:
		return store.Run{}, nil, &InputError{Err: fmt.Errorf("priority %d is outside -%d..%d", sub.Priority, MaxPriority, MaxPriority)}
	}
	name := sub.Name
	if name == "" {
		name = "spec.yaml"
	}
	src := &spec.Source{Path: path.Base(name), Data: []byte(sub.Spec), Files: map[string][]byte{}}
	var missing []string
	exp, err := spec.Parse(src.Path, src.Data, func(rel string) ([]byte, error) {
		f, ok := sub.Files[rel]
		if !ok {
			missing = append(missing, rel)
			return nil, fmt.Errorf("%s was not sent with the spec (submit it among the files)", rel)
		}
		src.Files[rel] = []byte(f)
		return []byte(f), nil
	}, spec.WithCatalog(s.cfg.Catalog))
	var probs spec.Problems
	if errors.As(err, &probs) {
		ie := problemsError(src.Path, probs)
		ie.Missing = missing
		return store.Run{}, nil, ie
	}
	if err != nil {
		return store.Run{}, nil, &InputError{Err: err}
	}
	if err := driver.Check(s.cfg.Backend, exp); err != nil {
		return store.Run{}, nil, &InputError{Err: err}
	}
	if s.mirror() != nil && exp.Checkpoints.URL == "" {
		return store.Run{}, nil, &InputError{Err: errors.New("checkpoints.url: this server's runs move between machines (server --mirror), and the default keeps checkpoints in the run's folder on one of them: name a store every machine reaches (s3://BUCKET/PREFIX, or file:// on a shared disk)")}
	}
	team, err := st.Team(ctx, u.Team)
	if err != nil {
		return store.Run{}, nil, fmt.Errorf("team %s: %w", u.Team, err)
	}
	if err := CheckStorage(team, s.cfg.Root, exp); err != nil {
		ie := &InputError{Err: fmt.Errorf("%s: where it keeps and reads data: %w", src.Path, err)}
		var probs spec.Problems
		if errors.As(err, &probs) {
			ie.Err = fmt.Errorf("%s: %d problems with where it keeps and reads data", src.Path, len(probs))
			for _, p := range probs {
				ie.Problems = append(ie.Problems, p.String())
			}
		}
		return store.Run{}, nil, ie
	}
	exp.Planner.Samples = min(exp.Planner.Samples, planSamplesMax)
	now := s.cfg.Now()
	active, err := st.Runs(ctx, store.RunFilter{Team: team.Name, States: []store.RunState{store.Queued, store.Running}})
	if err != nil {
		return store.Run{}, nil, err
	}
	rep, d, err := s.planFor(ctx, exp, team, active)
	if err != nil {
		return store.Run{}, nil, err
	}
	spent, err := st.Spent(ctx, team.Name, month(now))
	if err != nil {
		return store.Run{}, nil, err
	}
	// A first look without the lock spares a run folder for most refusals; the decision is
	// made again under it, on what the team holds then.
	if err := Admit(store.Ledger{Team: team, Spent: spent, Active: active}, u.Name, d, s.cfg.QueueLimits); err != nil {
		return store.Run{}, rep, err
	}
	if err := s.CheckTenancy(ctx); err != nil {
		return store.Run{}, nil, err
	}
	id := s.newRunID()
	dir := s.runDir(team.Name, id)
	if err := rundir.Mkdir(dir); err != nil {
		return store.Run{}, nil, err
	}
	sandbox, err := s.sandboxFor(ctx, dir)
	if err != nil {
		return store.Run{}, nil, err
	}
	rf := rundir.RunFile{RunID: id, Backend: s.cfg.Backend, TimeScale: s.cfg.TimeScale, Served: true, Sandbox: sandbox, Code: sub.Code}
	if sub.Code != "" { // the trainers run in their own copy of the code, whatever the spec's folder was
		if rf.Workdir, err = s.unpackCode(team.Name, sub.Code, dir, sandbox); err != nil {
			os.RemoveAll(dir)
			return store.Run{}, nil, err
		}
	}
	if err := driver.Create(driver.NewRun{Dir: dir, Run: rf, Source: src, Spec: exp, Plan: rep}); err != nil {
		return store.Run{}, nil, err
	}
	if err := s.pushNew(ctx, team.Name, id); err != nil {
		return store.Run{}, nil, err
	}
	plan, err := jsonOf(rep)
	if err != nil {
		return store.Run{}, nil, err
	}
	r := store.Run{ID: id, Team: team.Name, User: u.Name, Name: exp.Name, State: store.Queued, Priority: sub.Priority, SubmittedAt: now,
		Spec: src.Data, Plan: plan, PredictedCostUSD: d.CostUSD, PredictedJCTSeconds: rep.Predicted.JCT.Mean, GPUs: d.GPUs, Nodes: d.Nodes, Dir: dir}
	_, err = st.Decide(ctx, team.Name, month(now), func(l store.Ledger) (store.Decision, error) {
		if err := Admit(l, u.Name, d, s.cfg.QueueLimits); err != nil {
			return store.Decision{}, err
		}
		return store.Decision{Create: &r}, nil
	})
	if err != nil {
		// Refused under the lock (another submission took what was left): its folder goes.
		// TODO(issue 36): a mirrored server leaves the folder's copy in the mirror, under an ID
		// no run has.
		os.RemoveAll(dir)
		var ref *Refusal
		if errors.As(err, &ref) {
			return store.Run{}, rep, err
		}
		return store.Run{}, nil, err
	}
	s.poke()
	return r, rep, nil
}

// planFor plans exp for the capacity it will get: the spec's max_nodes capped by what its team
// may hold; and, when the team's other runs hold part of that and none waits, first for the
// share they leave free, which starts at once where the capped plan would wait. It takes the
// free-share plan when that meets the deadline.
func (s *Server) planFor(ctx context.Context, exp *spec.Experiment, team store.Team, active []store.Run) (*planner.Report, Demand, error) {
	c := &exp.Cluster
	quota := c.MaxNodes
	if team.MaxNodes > 0 {
		quota = min(quota, team.MaxNodes)
	}
	if team.MaxGPUs > 0 && c.GPUsPerNode > 0 {
		quota = min(quota, max(team.MaxGPUs/c.GPUsPerNode, 1))
	}
	waiting, nodes, gpus := false, 0, 0
	for _, r := range active {
		waiting = waiting || r.State == store.Queued
		nodes, gpus = nodes+r.Nodes, gpus+r.GPUs
	}
	free := quota - nodes
	if team.MaxNodes > 0 {
		free = min(free, team.MaxNodes-nodes)
	}
	if team.MaxGPUs > 0 && c.GPUsPerNode > 0 {
		free = min(free, (team.MaxGPUs-gpus)/c.GPUsPerNode)
	}
	if !waiting && free >= 1 && free < quota {
		shared := *exp
		shared.Cluster.MaxNodes = free
		if rep, err := planSpec(ctx, &shared); err == nil {
			if d, err := DemandOf(rep, &shared); err == nil {
				*exp = shared
				return rep, d, nil
			}
		}
	}
	asked := c.MaxNodes
	c.MaxNodes = quota
	rep, err := planSpec(ctx, exp)
	if err != nil && quota < asked && (errors.Is(err, planner.ErrInfeasible) || errors.Is(err, planner.ErrNoPlan)) {
		// The team's quota, not the spec, left too little: say which, and its figures.
		err = &InputError{Err: fmt.Errorf("%s: %w", quotaWords(team, asked, quota, c.GPUsPerNode, gpus, nodes), err)}
	}
	if err != nil {
		return nil, Demand{}, err
	}
	d, err := DemandOf(rep, exp)
	return rep, d, err
}

// planSpec plans exp as `rubberband run` does (planner.PlanRun); what the user must change (a
// spec the simulator cannot model, no plan that fits, one past the deadline or over the budget)
// is an *InputError.
func planSpec(ctx context.Context, exp *spec.Experiment) (*planner.Report, error) {
	sm, err := sim.For(exp)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	rep, err := planner.PlanRun(ctx, exp, sm, nil)
	var pe *planner.ProblemError
	if errors.As(err, &pe) || errors.Is(err, planner.ErrNoPlan) || errors.Is(err, planner.ErrInfeasible) {
		return nil, &InputError{Err: err}
	}
	return rep, err
}

// quotaWords say how team's quotas hold a plan to quota nodes of gpusPerNode GPUs where its spec
// asked for up to asked, and what the team's active runs hold of them now (gpus on nodes).
func quotaWords(team store.Team, asked, quota, gpusPerNode, gpus, nodes int) string {
	var limits []string
	if team.MaxGPUs > 0 {
		limits = append(limits, fmt.Sprintf("max_gpus %d, %d in use", team.MaxGPUs, gpus))
	}
	if team.MaxNodes > 0 {
		limits = append(limits, fmt.Sprintf("max_nodes %d, %d in use", team.MaxNodes, nodes))
	}
	return fmt.Sprintf("team %s's quota (%s) holds the plan to %s of %s, not the spec's max_nodes %d; with %s",
		team.Name, strings.Join(limits, "; "), format.Plural(quota, "node"), format.Plural(gpusPerNode, "GPU"), asked, format.Plural(quota*gpusPerNode, "GPU"))
}
