// Command rubberband-trainer runs the built-in example trainers alone (rubberband-trainer mlp,
// rubberband-trainer synthetic --spec FILE): what `rubberband trainer` runs, without the rest of
// the CLI, so that the local runtime's launches start fast. See package builtin.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rubberband-hpo/rubberband/trial/builtin"
)

func main() {
	if err := builtin.Main(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rubberband-trainer:", err)
		if errors.Is(err, builtin.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
