// Package spec owns the experiment specification: the YAML format (version 1), its decoding with
// a line number for every field, validation that reports every problem at once, the expansion of
// Successive Halving and Hyperband into stages, seeded search-space sampling and the built-in
// catalog of cloud instance types (Catalog), which a local catalog file's rows (CatalogFile,
// written by `rubberband catalog refresh`) may extend or override.
//
// Everything here is pure: Parse takes bytes and returns data; randomness comes in as a
// *rand.Rand; the instance catalog comes in with WithCatalog (the built-in one by default).
// Only Load (through ReadFile) and ReadCatalogFile touch the file system, to read the spec, its
// profile file and a catalog file the caller names: regular files only, of at most MaxFileSize
// (4 MiB) or MaxCatalogFileSize bytes.
//
// A value that fails to decode (a type error, a key given twice) is reported once and not
// judged further, and the other fields are still validated: one pass lists every problem,
// sorted by line. An unknown instance_type is one problem too, not one per field it would
// have filled.
//
// A spec may leave its profile out (the trainer not measured yet): Parse then returns a
// *NoProfileError, which says to run `rubberband profile`, unless ProfileOptional; package
// spec/starter writes the starting spec `rubberband init` gives a new user.
//
// Every number and string a spec gives is bounded, so that sums and products of them stay
// finite and no launch fails on a value that validated: MaxTrials, MaxIters, MaxStages,
// MaxTrialRuns, MaxSamples, MaxDeadline, MaxPricePerHour, MaxPricePerGB, MaxDataGB,
// MinNetworkGbps, MaxNetworkGbps, MaxNameLen, MaxParams, MaxParamNameLen, MaxChoiceValues,
// MaxEnvKeyLen, MaxTrainerBytes, and for the cluster's spot, ec2 and nomad blocks
// MaxInterruptionsPerHour, MaxSpotNotice, MaxEC2Tags, MaxTagKeyLen, MaxTagValueLen,
// MaxUserDataBytes, MaxSubnets, MaxSecurityGroups, MaxKeyNameLen, MaxNomadNameLen and
// MaxNomadMeta; docs/spec.md gives their values.
package spec
