package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// BenchmarkNomadScheduling measures, on a real Nomad server with 16 client agents of 4 GPUs, the
// time from a stage's sync to all 64 gangs of the next stage running (their first report).
func BenchmarkNomadScheduling(b *testing.B) {
	nomadBin := servers.Binary(b, "nomad", "RB_NOMAD_BIN")
	for b.Loop() {
		dir := b.TempDir()
		specFile := filepath.Join(dir, "sched.yaml")
		os.WriteFile(specFile, []byte(fmt.Sprintf(`name: sched
deadline: 10h
objective: {metric: score}
algorithm: {stages: [{trials: 64, iters: 1}, {trials: 64, iters: 1}]}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [rubberband, trainer, synthetic, --spec, %s]}
cluster: {gpus_per_node: 4, price_per_hour: 12, max_nodes: 16}
profile: {iter_latency: {1: {dist: constant, value: 0.001}}}
`, specFile)), 0o644)
		plan := planFile(b, dir, specFile, "64,64")
		state := filepath.Join(dir, "state")
		cmd := exec.Command(timed(b), "run", specFile, "--plan", plan, "--backend", "nomad", "--state", state, "--no-replan")
		cmd.Env = append(os.Environ(), "RB_NOMAD_BIN="+nomadBin, "NOMAD_ADDR=")
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, o)
		}
		var synced time.Time
		first := map[string]time.Time{}
		for _, e := range readJournal(b, state) {
			if e.Ev == journal.EvSync && e.Stage == 0 {
				synced = e.At
			}
			if e.Ev == journal.EvReport && !synced.IsZero() && e.At.After(synced) {
				if _, ok := first[e.Trial]; !ok {
					first[e.Trial] = e.At
				}
			}
		}
		if len(first) != 64 {
			b.Fatalf("%d stage-1 gangs reported", len(first))
		}
		var last time.Time
		for _, t := range first {
			if t.After(last) {
				last = t
			}
		}
		b.ReportMetric(last.Sub(synced).Seconds(), "s-sync-to-all-running")
	}
}
