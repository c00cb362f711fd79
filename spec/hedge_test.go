package spec

import (
	"strings"
	"testing"
)

// cluster.hedge defaults to on exactly when both markets are offered, may be turned off, and
// turned on without both markets is a problem at its own line.
func TestHedgeField(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		hedges  bool
		problem int // the line of the cluster.hedge problem; 0: none
	}{
		{"{instance_type: p3.8xlarge, markets: [on-demand, spot], spot: {discount: 0.7}}", true, 0},
		{"{instance_type: p3.8xlarge, markets: [spot, on-demand], spot: {discount: 0.7}, hedge: false}", false, 0},
		{"{instance_type: p3.8xlarge, market: spot, spot: {discount: 0.7}}", false, 0},
		{"{instance_type: p3.8xlarge}", false, 0},
		{"\n  instance_type: p3.8xlarge\n  market: spot\n  spot: {discount: 0.7}\n  hedge: true", false, 9},
		{"{instance_type: p3.8xlarge, markets: [on-demand], hedge: true}", false, 5},
	} {
		exp, err := Parse("t.yaml", []byte(typesBase+"cluster: "+tc.cluster+"\n"), nil)
		if tc.problem > 0 {
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Path != "cluster.hedge" || ps[0].Line != tc.problem || !strings.Contains(ps[0].Msg, "both") {
				t.Errorf("%s: problems %+v, want cluster.hedge at line %d", tc.cluster, ps, tc.problem)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.cluster, err)
		}
		if exp.Cluster.Hedges() != tc.hedges {
			t.Errorf("%s: hedges %v, want %v", tc.cluster, exp.Cluster.Hedges(), tc.hedges)
		}
	}
}

// The schema documents the field and takes a boolean.
func TestHedgeSchema(t *testing.T) {
	s, _ := schema(BuiltinCatalog())
	var find func(v any) map[string]any
	find = func(v any) map[string]any {
		switch x := v.(type) {
		case map[string]any:
			if h, ok := x["hedge"].(map[string]any); ok {
				return h
			}
			for _, y := range x {
				if h := find(y); h != nil {
					return h
				}
			}
		case []any:
			for _, y := range x {
				if h := find(y); h != nil {
					return h
				}
			}
		}
		return nil
	}
	h := find(s)
	if h == nil || h["type"] != "boolean" || !strings.Contains(h["description"].(string), "on_demand_nodes") {
		t.Fatalf("cluster.hedge in the schema: %v", h)
	}
}
