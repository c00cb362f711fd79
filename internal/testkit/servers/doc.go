// Package servers starts the real servers tests need — MinIO, Nomad and PostgreSQL — from the
// binaries `make deps` builds into .tools/bin (PostgreSQL: Debian's package it installs), on
// free loopback ports, in temporary directories, and stops and cleans them up when the test
// ends. When a binary is missing the test is skipped, except under CI (CI=true), where a
// missing server is a failure.
package servers
