// Package selfbin makes a test binary stand in for the rubberband binary that a runtime's nodes
// run (Runtime.Self): started as `worker ...` it is the worker wrapper (executor/worker), as
// `trainer NAME ...` a built-in trainer, so that runtime tests need no CLI built.
package selfbin

import (
	"context"
	"fmt"
	"os"

	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/trial/builtin"
)

// Dispatch runs the worker or a trainer and exits when the command line asks for one; else it
// returns, and TestMain goes on to the tests. workDir is the worker's folder ("" for a temporary
// one).
func Dispatch(workDir string) {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "worker":
		o, err := worker.ParseArgs(os.Args[2:], os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		o.WorkDir, o.Stdin, o.Stdout, o.Stderr = workDir, os.Stdin, os.Stdout, os.Stderr
		os.Exit(worker.Run(context.Background(), o))
	case "trainer":
		if err := builtin.Main(context.Background(), os.Args[2:], os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}
