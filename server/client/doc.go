// Package client speaks to a `rubberband server` over its API (/api/v1, docs/openapi.yaml): what
// the CLI uses when RUBBERBAND_SERVER names a server, and what a Go program would.
package client
