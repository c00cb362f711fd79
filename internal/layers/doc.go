// Package layers holds the layering test of the module: the layers block of
// docs/architecture.md gives every package a floor, and a test over `go list` fails on any
// import of a package on a higher floor, naming the arrow. The page is the table: a new package
// gets a floor there (a package the block does not place fails the test too). The package has no code
// of its own and nothing imports it.
package layers
