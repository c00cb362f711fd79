// Package client speaks to a `rubberband server` over its API (/api/v1, docs/openapi.yaml): what
// the CLI uses when RUBBERBAND_SERVER names a server, and what a Go program would. What the
// CLI's commands do against a server beyond their flags is here too (RunSpec, ResumeAndFollow,
// FollowToEnd, PrintRuns, RenderStatus, Best), with a server's answers' exit codes (ExitCode).
package client
