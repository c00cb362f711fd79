// Command testreport reads `go test -json` on standard input, writes the readable part of it as
// it comes, then the slowest tests and packages; it exits 1 when any test or package failed.
// `make test` pipes the suite through it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rubberband-hpo/rubberband/internal/testkit/testreport"
)

func main() {
	n := flag.Int("slowest", 15, "how many of the slowest tests to list")
	flag.Parse()
	s, err := testreport.Read(os.Stdin, os.Stdout)
	s.Slowest(os.Stdout, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if s.Failed {
		fmt.Println("\nFAIL")
		os.Exit(1)
	}
	fmt.Println("\nPASS")
}
