package spec

import "testing"

// The summary counts with one plural rule: "1 GPU", "up to 1 node", "2 parameters".
func TestSummary(t *testing.T) {
	exp, err := Parse("one.yaml", []byte(`name: one
deadline: 10m
objective: {metric: acc}
algorithm: {stages: [{trials: 1, iters: 2}]}
search_space: {lr: {type: uniform, min: 0, max: 1}, wd: {type: uniform, min: 0, max: 1}}
cluster: {gpus_per_node: 1, price_per_hour: 0.9, max_nodes: 1}
profile: {iter_latency: {1: {mean: 1}}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "one: stages, 1 bracket, 1 stage, 1 trial, 2 parameters; deadline 10m0s, node with 1 GPU at $0.9000/h on demand, up to 1 node"
	if got := exp.Summary(); got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
	asha, err := Parse("asha.yaml", []byte(`name: asha
deadline: 10m
objective: {metric: acc}
algorithm: {asha: {trials: 27, min_iters: 1, max_iters: 9, eta: 3, brackets: 2}}
search_space: {lr: {type: uniform, min: 0, max: 1}}
cluster: {gpus_per_node: 2, price_per_hour: 0.9, max_nodes: 3}
profile: {iter_latency: {1: {mean: 1}}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = "asha: ASHA(n=27, r=1, R=9, eta=3), 2 brackets, 5 rungs, 27 trials, 1 parameter; deadline 10m0s, node with 2 GPUs at $0.9000/h on demand, up to 3 nodes"
	if got := asha.Summary(); got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
}
