// Package e2e holds the end-to-end tests of the rubberband CLI and nothing else: TestMain builds
// the binary once (with the race detector, beside its own rubberband-trainer, as `make build`
// lays them out) and each test drives it as a user would, from the repository's root, against
// real local servers (Nomad, MinIO, a rubberband server) where it needs them. It may import
// anything in the module; nothing imports it.
package e2e
