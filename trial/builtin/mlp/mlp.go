// Package mlp is a real trainer: a one-hidden-layer neural network (gonum) learning the UCI
// digits, with data-parallel workers when WORLD_SIZE > 1 (each rank computes the gradient of its
// share of every mini-batch; rank 0 sums them over TCP and sends the sum back, so all replicas
// stay equal). One iteration is one epoch over the training split; rank 0 reports validation
// accuracy and loss after each, and writes weights, momentum buffers and the iteration as its
// checkpoint. It follows the trainer contract through rbtrain.
package mlp

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/rubberband-hpo/rubberband/trial/builtin/digits"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// Params are the hyperparameters the trainer understands.
type Params struct {
	LR       float64 `json:"lr"`
	Momentum float64 `json:"momentum"`
	Hidden   int     `json:"hidden"`
	L2       float64 `json:"l2"`
	Batch    int     `json:"batch"`
}

// State is the model and optimizer after Iter epochs, flattened: W1 (64 x H), b1 (H), W2
// (H x 10), b2 (10).
type State struct {
	Iter     int
	Hidden   int
	Weights  []float64
	Velocity []float64
}

const (
	inputs, classes = 64, 10
	valSize         = 360
	checkpointName  = "model.gob"
)

// Main trains one TRAIN run as the environment describes.
func Main(run *rbtrain.Run) error {
	p := Params{LR: 0.1, Momentum: 0.9, Hidden: 64, Batch: 32}
	if err := run.Params(&p); err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	d, err := LoadData()
	if err != nil {
		return err
	}
	seed := hashSeed(run.TrialID)
	st, err := load(run, p.Hidden, seed)
	if err != nil {
		return err
	}
	comm, err := connect(run)
	if err != nil {
		return err
	}
	defer comm.Close()
	// Rank 0's state is the truth: it restored the checkpoint; the others start from it.
	if err := comm.Broadcast(st.Weights); err != nil {
		return err
	}
	if err := comm.Broadcast(st.Velocity); err != nil {
		return err
	}
	for st.Iter < run.TargetIter {
		if err := d.Epoch(p, st, seed, run.Rank, run.WorldSize, comm.AllReduceSum); err != nil {
			return err
		}
		acc, loss := d.Evaluate(st)
		run.Report(st.Iter, map[string]float64{"val_accuracy": acc, "val_loss": loss})
		select {
		case <-run.Terminated():
			return save(run, st) // stopped for migration: keep what was learned
		default:
		}
	}
	return save(run, st)
}

func (p Params) check() error {
	if p.Hidden < 1 || p.Batch < 1 || p.LR <= 0 {
		return fmt.Errorf("mlp: bad params %+v", p)
	}
	return nil
}

// Data is the digits, split once (seeded) into training and validation sets.
type Data struct {
	trainX, valX [][]float64
	trainY, valY []int
}

// LoadData reads the embedded digits and splits them.
func LoadData() (*Data, error) {
	x, y, err := digits.Digits()
	if err != nil {
		return nil, err
	}
	d := &Data{}
	d.trainX, d.trainY, d.valX, d.valY = split(x, y)
	return d, nil
}

// Epoch trains st one more epoch under p: rank of world replicas computes the gradient of its
// share of each mini-batch, and allReduce sums the shares (nil: one replica, nothing to sum).
// The order of the samples is fixed by seed and the epoch, so training is deterministic.
func (d *Data) Epoch(p Params, st *State, seed uint64, rank, world int, allReduce func([]float64) error) error {
	if err := p.check(); err != nil {
		return err
	}
	mdl := newNet(st.Hidden, st.Weights)
	grad := make([]float64, len(st.Weights))
	epoch := st.Iter + 1
	order := rand.New(rand.NewPCG(seed, uint64(epoch))).Perm(len(d.trainX))
	for start := 0; start < len(order); start += p.Batch {
		batch := order[start:min(start+p.Batch, len(order))]
		var mine []int
		for i := rank; i < len(batch); i += max(world, 1) {
			mine = append(mine, batch[i])
		}
		clear(grad)
		mdl.gradient(d.trainX, d.trainY, mine, grad)
		if allReduce != nil {
			if err := allReduce(grad); err != nil {
				return err
			}
		}
		for i := range st.Weights {
			g := grad[i]/float64(len(batch)) + p.L2*st.Weights[i]
			st.Velocity[i] = p.Momentum*st.Velocity[i] - p.LR*g
			st.Weights[i] += st.Velocity[i]
		}
	}
	st.Iter = epoch
	return nil
}

// Evaluate is st's accuracy and mean cross-entropy on the validation set.
func (d *Data) Evaluate(st *State) (acc, loss float64) {
	return newNet(st.Hidden, st.Weights).evaluate(d.valX, d.valY)
}

func split(x [][]float64, y []int) (tx [][]float64, ty []int, vx [][]float64, vy []int) {
	perm := rand.New(rand.NewPCG(42, 42)).Perm(len(x))
	for i, j := range perm {
		if i < valSize {
			vx, vy = append(vx, x[j]), append(vy, y[j])
		} else {
			tx, ty = append(tx, x[j]), append(ty, y[j])
		}
	}
	return tx, ty, vx, vy
}

func hashSeed(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func load(run *rbtrain.Run, hidden int, seed uint64) (*State, error) {
	b, ok, err := run.ReadCheckpoint(checkpointName)
	if err != nil {
		return nil, err
	}
	if !ok {
		return NewState(hidden, seed), nil
	}
	var st State
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
		return nil, fmt.Errorf("mlp: read checkpoint: %w", err)
	}
	if n := len(NewState(hidden, 0).Weights); len(st.Weights) != n {
		return nil, fmt.Errorf("mlp: checkpoint has %d weights, the model %d", len(st.Weights), n)
	}
	return &st, nil
}

// NewState is an untrained network of hidden units, He-initialised from seed: the same seed
// starts from the same weights.
func NewState(hidden int, seed uint64) *State {
	n := inputs*hidden + hidden + hidden*classes + classes
	r := rand.New(rand.NewPCG(seed, 1))
	st := &State{Hidden: hidden, Weights: make([]float64, n), Velocity: make([]float64, n)}
	for i := range inputs * hidden {
		st.Weights[i] = r.NormFloat64() * math.Sqrt(2.0/inputs)
	}
	off := inputs*hidden + hidden
	for i := range hidden * classes {
		st.Weights[off+i] = r.NormFloat64() * math.Sqrt(2.0/float64(hidden))
	}
	return st
}

func save(run *rbtrain.Run, st *State) error {
	if run.Rank != 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(st); err != nil {
		return fmt.Errorf("mlp: encode checkpoint: %w", err)
	}
	return run.WriteCheckpoint(checkpointName, buf.Bytes())
}

// model views the flat weight vector as matrices (no copies: updates to the vector show through).
type model struct {
	hidden         int
	w1, b1, w2, b2 *mat.Dense
}

func newNet(hidden int, w []float64) *model {
	o1 := inputs * hidden
	o2 := o1 + hidden
	o3 := o2 + hidden*classes
	return &model{hidden: hidden,
		w1: mat.NewDense(inputs, hidden, w[:o1]), b1: mat.NewDense(1, hidden, w[o1:o2]),
		w2: mat.NewDense(hidden, classes, w[o2:o3]), b2: mat.NewDense(1, classes, w[o3:])}
}

// forward returns hidden activations and class probabilities for rows of x.
func (n *model) forward(x *mat.Dense) (h, probs *mat.Dense) {
	rows, _ := x.Dims()
	h = mat.NewDense(rows, n.hidden, nil)
	h.Mul(x, n.w1)
	h.Apply(func(i, j int, v float64) float64 { return math.Max(0, v+n.b1.At(0, j)) }, h)
	probs = mat.NewDense(rows, classes, nil)
	probs.Mul(h, n.w2)
	for i := range rows {
		row := probs.RawRowView(i)
		top := math.Inf(-1)
		for j := range row {
			row[j] += n.b2.At(0, j)
			top = math.Max(top, row[j])
		}
		sum := 0.0
		for j := range row {
			row[j] = math.Exp(row[j] - top)
			sum += row[j]
		}
		for j := range row {
			row[j] /= sum
		}
	}
	return h, probs
}

func rowsOf(x [][]float64, idx []int) *mat.Dense {
	m := mat.NewDense(max(len(idx), 1), inputs, nil)
	for i, j := range idx {
		m.SetRow(i, x[j])
	}
	return m
}

// gradient adds the summed cross-entropy gradient of the samples idx to grad.
func (n *model) gradient(x [][]float64, y []int, idx []int, grad []float64) {
	if len(idx) == 0 {
		return
	}
	xb := rowsOf(x, idx)
	h, probs := n.forward(xb)
	for i, j := range idx {
		probs.Set(i, y[j], probs.At(i, y[j])-1) // dL/dlogits = p - onehot
	}
	g := newNet(n.hidden, grad)
	var dw2 mat.Dense
	dw2.Mul(h.T(), probs)
	g.w2.Add(g.w2, &dw2)
	rows, _ := probs.Dims()
	for i := range rows {
		for j := range classes {
			g.b2.Set(0, j, g.b2.At(0, j)+probs.At(i, j))
		}
	}
	var dh mat.Dense
	dh.Mul(probs, n.w2.T())
	dh.Apply(func(i, j int, v float64) float64 {
		if h.At(i, j) <= 0 {
			return 0
		}
		return v
	}, &dh)
	var dw1 mat.Dense
	dw1.Mul(xb.T(), &dh)
	g.w1.Add(g.w1, &dw1)
	for i := range rows {
		for j := range n.hidden {
			g.b1.Set(0, j, g.b1.At(0, j)+dh.At(i, j))
		}
	}
}

func (n *model) evaluate(x [][]float64, y []int) (acc, loss float64) {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	_, probs := n.forward(rowsOf(x, idx))
	right := 0
	for i := range x {
		row := probs.RawRowView(i)
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		if best == y[i] {
			right++
		}
		loss -= math.Log(math.Max(row[y[i]], 1e-12))
	}
	return float64(right) / float64(len(x)), loss / float64(len(x))
}
