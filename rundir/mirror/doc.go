// Package mirror keeps a copy of run state directories where every server can reach them, so
// that a server's run can move to another machine that shares no folder with it (a Nomad
// allocation placed elsewhere). Store is the copy: a folder (Dir, for a disk every server
// mounts) or a database (sqlstore's RunFiles), both held to one contract (mirrortest).
//
// The journal is copied synchronously: JournalWrap makes each of the journal's syncs an Append
// to the store before the sync returns, so a decision the executor acts on is in the store
// first, and a second driver of the same run (a stale server) fails at its first sync
// (ErrConflict) instead of forking the run. Everything else (logs, the driver log, the report,
// the spec and plan) a Pusher copies after it is written, every second and once when the
// driver exits. Restore brings a directory up to date from the store before a driver resumes
// it, or before a server reads a run it does not drive. A server tells the drivers it starts
// where its mirror is in their environment (EnvAt, EnvRun), and they open it with Open.
package mirror
