package spec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The nomad block decodes with its lines; a block needs one filter, and each wrong name is one
// problem at its path.
func TestNomadPoolBlock(t *testing.T) {
	src := withField("cluster:\n  gpus_per_node: 4\n  price_per_hour: 2\n  nomad:\n    node_pool: gpu-a100\n    datacenter: dc1\n    class: ml.large\n    meta: {team: ml, gpu_count: 4}")
	exp, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &NomadPool{NodePool: "gpu-a100", Datacenter: "dc1", Class: "ml.large", Meta: map[string]string{"team": "ml", "gpu_count": "4"}}
	if !reflect.DeepEqual(exp.Cluster.Nomad, want) || exp.Line("cluster.nomad.meta") != 11 {
		t.Fatalf("decoded %+v, meta on line %d", exp.Cluster.Nomad, exp.Line("cluster.nomad.meta"))
	}
	nomad := func(block string) string {
		return "cluster: {gpus_per_node: 4, price_per_hour: 2, nomad: " + block + "}"
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	meta := func(n int) string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf("k%d: v", i))
		}
		return "{meta: {" + strings.Join(kv, ", ") + "}}"
	}
	for _, tc := range []struct{ line, path, msg string }{
		{nomad("{node_pool: default}"), "", ""},
		{nomad("{datacenter: " + long(128) + "}"), "", ""},
		{nomad("{class: gpu}"), "", ""},
		{nomad("{meta: {rb.pool: yes}}"), "", ""},
		{nomad(meta(MaxNomadMeta)), "", ""},
		{nomad("{}"), "cluster.nomad", "at least one filter"},
		{nomad("{meta: {}}"), "cluster.nomad", "at least one filter"},
		{nomad("{node_pool: 'gpu pool'}"), "cluster.nomad.node_pool", "not a Nomad name"},
		{nomad("{node_pool: gpu/a100}"), "cluster.nomad.node_pool", "not a Nomad name"},
		{nomad("{datacenter: " + long(129) + "}"), "cluster.nomad.datacenter", "not a Nomad name"},
		{nomad("{class: " + long(129) + "}"), "cluster.nomad.class", "at most 128"},
		{nomad("{meta: {'a b': x}}"), "cluster.nomad.meta.a b", "not a meta key"},
		{nomad("{meta: {k: " + long(129) + "}}"), "cluster.nomad.meta.k", "at most 128"},
		{nomad(meta(MaxNomadMeta + 1)), "cluster.nomad.meta", "at most 64"},
		{nomad("{node_pool: gpu, pool: x}"), "cluster.nomad.pool", "unknown field"},
		{nomad("gpu"), "cluster.nomad", "expected a mapping"},
	} {
		_, err := Parse("a.yaml", []byte(withField(tc.line)), nil)
		probs := problems(t, err)
		name := tc.line
		if len(name) > 120 {
			name = name[:120] + "..."
		}
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: refused:\n%.500v", name, err)
		case tc.path != "" && (len(probs) != 1 || probs[0].Path != tc.path || probs[0].Line != 4 || !strings.Contains(probs[0].Msg, tc.msg)):
			t.Errorf("%s: want one problem at line 4, %s: ...%s..., got\n%.500v", name, tc.path, tc.msg, err)
		}
	}
}
