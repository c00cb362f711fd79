// Package layers holds the layering test of the module: a table that gives every package a
// floor, and a test over `go list` that fails on any import of a package on a higher floor,
// naming the arrow. The table is the layering docs/architecture.md draws; a new package gets a
// floor there (a package the table does not place fails the test too). The package has no code
// of its own and nothing imports it.
package layers
