package virtual_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
)

func TestReplayOneSeed(t *testing.T) {
	job, seedS := os.Getenv("RB_JOB"), os.Getenv("RB_SEED")
	if job == "" {
		t.Skip()
	}
	seed, _ := strconv.ParseInt(seedS, 10, 64)
	base := planned(t, job)
	replan := strings.Contains(job, "sha") && !strings.Contains(job, "asha")
	clean, jct := runOnce(t, base, nil, replan)
	f := virtual.Draw(seed, virtual.Scale{Records: len(clean.events), Nodes: clean.nodes, Launches: executorLaunches(clean.events), Duration: jct, Spot: strings.Contains(job, "spot")})
	fmt.Println(f)
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	var log strings.Builder
	cfg := with(base, path, f, replan)
	cfg.Log = &log
	out, err := virtual.Run(context.Background(), cfg)
	fmt.Println("err", err)
	fmt.Println(log.String())
	fmt.Println(strings.Join(out.World.Triggered(), "\n"))
	fmt.Println(strings.Join(out.World.Breaches(), "\n"))
	ev, _ := journal.ReadJournal(path)
	for i, e := range ev {
		if e.Ev == journal.EvReport || e.Ev == journal.EvTrial {
			continue
		}
		n := ""
		if e.Node != nil {
			n = e.Node.ID
		}
		fmt.Println(i+1, e.At.Sub(virtual.Epoch), e.Ev, "b", e.Bracket, "s", e.Stage, e.Trial, e.Try, n, e.Nodes, e.Error, e.Token)
	}
}
