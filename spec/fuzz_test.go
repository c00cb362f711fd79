package spec

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse: no input makes the decoder or validator panic, every failure is a Problems list
// whose entries all carry a message, and a spec that parses expands into usable stages.
func FuzzParse(f *testing.F) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Add([]byte("name: x\nalgorithm: {hyperband: {min_iters: 1, max_iters: 81, eta: 3}}\n"))
	f.Add([]byte("a: &a [*a, *a]\nb: *a\n"))
	f.Add([]byte("algorithm: {stages: [{trials: 3, iters: 1}, {trials: 5, iters: 2}]}\n"))
	f.Add([]byte("cluster: {scale_latency: {dist: empirical, samples: [1s, 2, 3m]}}\n"))
	f.Add([]byte("cluster: {instance_type: p3.2xlarge, market: spot, spot: {discount: 0.7, lifetimes: {mean: 2h}}, ec2: {ami: ami-0123456789abcdef0, subnets: [subnet-0a1b2c3d], tags: {a: b}}, nomad: {meta: {k: v}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		exp, err := Parse("fuzz.yaml", data, func(string) ([]byte, error) { return data, nil })
		if err != nil {
			probs, ok := err.(Problems)
			if !ok || len(probs) == 0 {
				t.Fatalf("error %T %v is not a Problems list", err, err)
			}
			for _, p := range probs {
				if p.Msg == "" || !strings.HasPrefix(p.String(), "fuzz.yaml:") && !strings.Contains(p.String(), ".yaml") {
					t.Fatalf("problem without location or message: %#v", p)
				}
			}
			return
		}
		for _, b := range exp.Algorithm.Brackets() {
			if len(b.Stages) == 0 || b.Stages[0].Trials < 1 {
				t.Fatalf("valid spec expands to %+v", b)
			}
		}
	})
}
