package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/server/client"
)

// BenchmarkServerLoad: a server driving 4 runs of the synthetic job (local backend, time scale
// 0.2: about a minute each) while RB_BENCH_LOAD_CLIENTS API clients (200 by default; 0 for the
// baseline) list the runs and follow their events, for RB_BENCH_LOAD_SECONDS (60 by default). It
// reports the list requests' latency (p50, p99), the requests and errors, and the runs' realized
// JCT against their predictions (the drivers' overhead under the load).
func BenchmarkServerLoad(b *testing.B) {
	seconds, clients := 60, 200
	if s := os.Getenv("RB_BENCH_LOAD_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	if s := os.Getenv("RB_BENCH_LOAD_CLIENTS"); s != "" {
		fmt.Sscan(s, &clients)
	}
	root := b.TempDir()
	rbMust(b, "server", "teams", "add", "ml", "--root", root)
	out := rbMust(b, "server", "users", "add", "alice", "--team", "ml", "--root", root)
	token := strings.TrimSpace(out)
	srv := startServerWith(b, timed(b), "--root", root, "--time-scale", "0.2")
	cl, _ := client.New(srv.base, token)
	var ids []string
	for range 4 {
		run, _, err := cl.Submit(context.Background(), submissionOf(b, "e2e/testdata/synthetic.yaml"))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	b.ResetTimer()
	stop := time.Now().Add(time.Duration(seconds) * time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	errs, requests := 0, 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c%4 == 0 { // a quarter follow a run's events
				req, _ := http.NewRequest("GET", srv.base+"/api/v1/runs/"+ids[c%len(ids)]+"/events", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				defer cancel()
				resp, err := http.DefaultClient.Do(req.WithContext(ctx))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				return
			}
			for time.Now().Before(stop) {
				t0 := time.Now()
				_, err := cl.Runs(context.Background())
				d := time.Since(t0)
				mu.Lock()
				requests++
				if err != nil {
					errs++
				}
				lat = append(lat, d)
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "list-p50-ms")
		b.ReportMetric(q(0.99), "list-p99-ms")
	}
	b.ReportMetric(float64(requests), "lists")
	b.ReportMetric(float64(errs), "errors")
	for _, id := range ids {
		r := waitRun(b, cl, id, "ended", func(r client.Run) bool { return r.State.Ended() })
		var rep runstate.Report
		if err := cl.Get(context.Background(), id, "report", &rep); err == nil {
			fmt.Printf("run %s: %s, JCT %.1f s realized, %.1f s predicted (%+.1f%%)\n", id, r.State, rep.Realized.JCT, rep.Predicted.JCT, 100*(rep.Realized.JCT/rep.Predicted.JCT-1))
		}
	}
}

func rbMust(b *testing.B, args ...string) string {
	out, errOut, code := rb(b, args...)
	if code != 0 {
		b.Fatalf("%v: %s", args, errOut)
	}
	return out
}
