// Package testkit holds, in its subfolders, what only the tests and `make test` use: test
// doubles and real servers started for tests (ec2sim: a fake EC2 whose instances boot; servers:
// MinIO, Nomad and PostgreSQL from .tools/bin; paperspec: the paper's example jobs as tests vary them) and the reader of `go test -json` (testreport).
// No package of the product imports them (the layering test checks it); they may import any
// package below cmd. This folder apart from the leaf utilities of internal/ (format, safefile,
// syncio, term, palette, infra, logcap) lets the layering be read from the tree.
package testkit
