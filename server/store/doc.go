// Package store is what `rubberband server` keeps in its database: teams with their quotas and
// budgets, users with their hashed tokens, runs (queued, running, ended) with their specs, plans
// and accrued cost, the monthly charges against each team's budget, the audit log, and the lease
// that lets one server drive the runs at a time. Store is the interface; package sqlstore
// implements it over SQLite (modernc.org/sqlite, the embedded default) and PostgreSQL (pgx), with
// versioned migrations applied at open; package storetest is the contract suite both pass.
package store
