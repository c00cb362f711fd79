// Package providertest is the cloud.Provider contract as one test suite, run over every provider
// (local here, nomadlocal against a real Nomad server, nomadpool against a real server's client
// agents, EC2 against its in-repo API server),
// as checkpoint/storetest is for stores: created nodes are running and described, List is exactly
// what is held, Delete releases and forgives unknown IDs, a provider reopened on the same state
// finds what an earlier one held, and a cancelled Create leaves nothing the caller does not know of.
package providertest
