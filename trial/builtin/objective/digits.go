package objective

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"sync"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/mlp"
)

// DigitsEpochs is what digits' Final trains a configuration for: the benchmarks' largest budget.
const DigitsEpochs = 27

// digits is a real benchmark: the built-in MLP trainer (package mlp) learning the UCI digits,
// one iteration one epoch, its loss the validation cross-entropy. Its optimum is unknown, so
// Optimum is 0 (no loss is lower) and regret is the validation loss itself. Training is a
// function of the configuration (the initial weights and the order of the samples are seeded
// by its hash), so a configuration's curve is computed once, epoch after epoch, and kept: the
// n-th report of a trial resumed from a checkpoint is what it would have been without the stop.
func digits() Objective {
	space := map[string]spec.Param{
		"lr":       {Type: "loguniform", Min: 1e-3, Max: 1},
		"momentum": {Type: "uniform", Min: 0, Max: 0.99},
		"hidden":   {Type: "choice", Values: []any{int64(16), int64(32), int64(64)}},
		"l2":       {Type: "loguniform", Min: 1e-6, Max: 1e-1},
		"batch":    {Type: "choice", Values: []any{int64(32), int64(64), int64(128)}},
	}
	t := &trainedCurves{byConfig: map[string]*trainedCurve{}}
	return Objective{
		Name:    "digits",
		Space:   space,
		Optimum: 0,
		Value:   func(c spec.Config, iter, _ int) float64 { return t.loss(c, iter) },
		Final:   func(c spec.Config) float64 { return t.loss(c, DigitsEpochs) },
	}
}

// trainedCurves trains each configuration once, as far as it has been asked for.
type trainedCurves struct {
	mu       sync.Mutex
	data     *mlp.Data
	dataErr  error
	byConfig map[string]*trainedCurve
}

type trainedCurve struct {
	mu     sync.Mutex
	params mlp.Params
	seed   uint64
	state  *mlp.State
	losses []float64 // losses[k-1]: validation loss after k epochs
}

// diverged is the loss of a network whose weights overflowed: the largest the evaluation gives.
var diverged = -math.Log(1e-12)

func (t *trainedCurves) loss(c spec.Config, iter int) float64 {
	key, _ := json.Marshal(c) // sorted keys: canonical
	t.mu.Lock()
	if t.data == nil && t.dataErr == nil {
		t.data, t.dataErr = mlp.LoadData()
	}
	cv, ok := t.byConfig[string(key)]
	if !ok {
		h := fnv.New64a()
		h.Write(key)
		p := mlp.Params{LR: num(c, "lr"), Momentum: num(c, "momentum"), Hidden: int(num(c, "hidden")),
			L2: num(c, "l2"), Batch: int(num(c, "batch"))}
		cv = &trainedCurve{params: p, seed: h.Sum64()}
		t.byConfig[string(key)] = cv
	}
	data, err := t.data, t.dataErr
	t.mu.Unlock()
	if err != nil || iter < 1 {
		return diverged
	}
	cv.mu.Lock()
	defer cv.mu.Unlock()
	for len(cv.losses) < iter {
		if cv.state == nil {
			cv.state = mlp.NewState(cv.params.Hidden, cv.seed)
		}
		if err := data.Epoch(cv.params, cv.state, cv.seed, 0, 1, nil); err != nil {
			return diverged
		}
		_, l := data.Evaluate(cv.state)
		if math.IsNaN(l) || math.IsInf(l, 0) || l > diverged {
			l = diverged
		}
		cv.losses = append(cv.losses, l)
	}
	return cv.losses[iter-1]
}
