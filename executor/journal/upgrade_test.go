package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// Records of older drivers are read in today's shape: no reader sees an old record's words.
func TestUpgradeReadsOldRecordsInTodaysShape(t *testing.T) {
	cases := []struct {
		name string
		line string
		want Event
	}{
		{"gave up in words", `{"ev":"fail","trial":"t1","error":"gave up"}`, Event{Ev: EvFail, Trial: "t1", Error: "gave up", GaveUp: true}},
		{"a failure stays one", `{"ev":"fail","trial":"t1","error":"exit 1"}`, Event{Ev: EvFail, Trial: "t1", Error: "exit 1"}},
		{"lost node", `{"ev":"node_down","nodes":["n1"],"error":"lost"}`, Event{Ev: EvNodeOff, Nodes: []string{"n1"}, Error: "lost", Cause: string(NodeLost)}},
		{"orphan node", `{"ev":"node_down","nodes":["n1"],"error":"orphan of a dead driver"}`, Event{Ev: EvNodeOff, Nodes: []string{"n1"}, Error: "orphan of a dead driver", Cause: string(NodeOrphan)}},
		{"released node", `{"ev":"node_down","nodes":["n1"]}`, Event{Ev: EvNodeOff, Nodes: []string{"n1"}, Cause: string(NodeReleased)}},
		{"a cause kept", `{"ev":"node_down","nodes":["n1"],"error":"lost","cause":"drained"}`, Event{Ev: EvNodeOff, Nodes: []string{"n1"}, Error: "lost", Cause: string(NodeDrained)}},
		{"interrupted stop", `{"ev":"stop","error":"interrupted"}`, Event{Ev: EvStop, Error: "interrupted", Cause: string(StopInterrupted)}},
		{"budget stop", `{"ev":"stop","error":"budget: over"}`, Event{Ev: EvStop, Error: "budget: over", Cause: string(StopBudget)}},
		{"failed stop", `{"ev":"stop","error":"boom"}`, Event{Ev: EvStop, Error: "boom", Cause: string(StopFailed)}},
		{"request count in Try", `{"ev":"request","try":3,"token":"b0-r1"}`, Event{Ev: EvRequest, Count: 3, Token: "b0-r1"}},
		{"request count", `{"ev":"request","count":2,"token":"b0-r1"}`, Event{Ev: EvRequest, Count: 2, Token: "b0-r1"}},
		{"phase in Stage", `{"ev":"phase","stage":2,"gpus":4}`, Event{Ev: EvPhase, Phase: 2, GPUs: 4}},
		{"phase", `{"ev":"phase","phase":1,"gpus":8}`, Event{Ev: EvPhase, Phase: 1, GPUs: 8}},
		{"pause's fault in Reason", `{"ev":"stop","error":"paused: disk full","cause":"paused","reason":"disk full","where":"/ckpt"}`, Event{Ev: EvStop, Error: "paused: disk full", Cause: string(StopPaused), Fault: "disk full", Where: "/ckpt"}},
		{"pause's fault", `{"ev":"stop","error":"paused: disk full","cause":"paused","fault":"disk full","where":"/ckpt"}`, Event{Ev: EvStop, Error: "paused: disk full", Cause: string(StopPaused), Fault: "disk full", Where: "/ckpt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			if err := os.WriteFile(path, []byte(c.line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadJournal(path)
			if err != nil || len(got) != 1 {
				t.Fatalf("read: %v %v", got, err)
			}
			g, w := got[0], c.want
			if g.Ev != w.Ev || g.Error != w.Error || g.GaveUp != w.GaveUp || g.Cause != w.Cause || g.Count != w.Count || g.Phase != w.Phase || g.Stage != w.Stage || g.GPUs != w.GPUs || g.Try != w.Try || g.Token != w.Token ||
				g.Fault != w.Fault || g.Reason != w.Reason || g.Where != w.Where {
				t.Errorf("got %+v, want %+v", g, w)
			}
		})
	}
}
