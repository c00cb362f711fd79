// Package testreport reads `go test -json` output (test2json's events) as it streams: it echoes
// what a person reading a test log wants (each package's result, every failing test's output,
// anything that is not JSON, such as build errors) and keeps each test's and package's elapsed
// time, so that `make test` can end with the slowest tests — the suite's time budget, visible.
// cmd/testreport is its command.
package testreport
