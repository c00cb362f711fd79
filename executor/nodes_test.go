package executor

import (
	"context"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// listDuring is a provider whose List lets during run before it answers, as a slow List lets
// the rest of the run go on (a replacement rented meanwhile).
type listDuring struct {
	*fake.Provider
	during func()
}

func (p listDuring) List(ctx context.Context) ([]cloud.Node, error) {
	held, err := p.Provider.List(ctx)
	p.during()
	return held, err
}

// A node rented while the provider's List ran is not in its answer, and is not lost for that;
// a node held before it and missing from it is.
func TestLostNodesOnlyOfBeforeTheList(t *testing.T) {
	p := &fake.Provider{GPUsPerNode: 4}
	held, err := p.Create(context.Background(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	gone := cloud.Node{ID: "gone", GPUs: 4}
	x := &run{st: &runstate.State{Nodes: [][]cloud.Node{{held[0], gone}}}}
	x.cfg.Provider = listDuring{Provider: p, during: func() {
		x.mu.Lock()
		x.st.Nodes[0] = append(x.st.Nodes[0], cloud.Node{ID: "rented-meanwhile", GPUs: 4})
		x.mu.Unlock()
	}}
	lost, err := x.lostNodes(context.Background(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lost["rented-meanwhile"]; ok || len(lost) != 1 {
		t.Fatalf("lost %v: only the node held before the List and missing from it (gone) is lost", lost)
	}
	if _, ok := lost["gone"]; !ok {
		t.Fatalf("lost %v: gone was held and the provider does not list it", lost)
	}
}
