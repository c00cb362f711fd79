// Package spec owns the experiment specification: the YAML format (version 1), its decoding with
// a line number for every field, validation that reports every problem at once, the expansion of
// Successive Halving and Hyperband into stages, seeded search-space sampling and the built-in
// catalog of cloud instance types.
//
// Everything here is pure: Parse takes bytes and returns data; randomness comes in as a
// *rand.Rand. Only Load touches the file system, to read the spec and its profile file.
package spec
