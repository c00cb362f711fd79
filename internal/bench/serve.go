package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// maxRequest bounds one request line: a configuration of a benchmark is a few hundred bytes.
const maxRequest = 1 << 20

// Request asks ServeObjective for a configuration's loss after Iter of MaxIter iterations, or,
// with Final, its noise-free loss at full fidelity.
type Request struct {
	Params  spec.Config `json:"params"`
	Iter    int         `json:"iter"`
	MaxIter int         `json:"max_iter"`
	Final   bool        `json:"final"`
}

// Reply is ServeObjective's answer to one Request: the loss, or why there is none.
type Reply struct {
	Value float64 `json:"value"`
	Error string  `json:"error,omitempty"`
}

// ServeObjective answers Requests read from r, one JSON object a line, with Replies written to
// w, one a line, until r ends: how scripts/optuna_bench.py evaluates a benchmark it does not
// compute itself (digits: the Go network, trained as rubberband's runs train it), so that Optuna
// and rubberband search exactly the same function. A malformed or oversized line is answered
// with an error and ends nothing but itself; a line over 1 MiB ends the stream.
func ServeObjective(ctx context.Context, o objective.Objective, r io.Reader, w io.Writer) error {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 0, 64<<10), maxRequest)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	for in.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var req Request
		var rep Reply
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			rep.Error = fmt.Sprintf("request: %v", err)
		} else if req.Final {
			rep.Value = o.Final(req.Params)
		} else if req.Iter < 1 || req.MaxIter < 1 {
			rep.Error = fmt.Sprintf("request: iter %d of max_iter %d: both must be at least 1", req.Iter, req.MaxIter)
		} else {
			rep.Value = o.Value(req.Params, req.Iter, req.MaxIter)
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("objective %s: %w", o.Name, err)
	}
	return nil
}
