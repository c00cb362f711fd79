// Package storetest is the contract suite of store.Store: RunStoreTests checks every method's
// documented behaviour against a real implementation, so that each database the server supports
// passes the same tests (as litestream's RunWithReplicaClient does for its replica clients).
package storetest
