// Package server is `rubberband server`: one process that holds teams, users, runs and the queue
// in a database (package store) and drives the runs itself, for a platform team's users who
// submit specs over an HTTP API (/api/v1) instead of each running a driver on their own machine.
//
// What it decides is pure and tested alone: who a token is (Authenticate), whether a spec's plan
// fits its team's budget (Admit), which queued runs start now and when the others are predicted
// to (Schedule). What it does sits at the edges: the API's handlers, and a Supervisor that runs
// each run's driver as a child process of the CLI (`rubberband run`, then `rubberband resume`
// after a crash), so that a driver that dies takes nothing else down and a server that dies
// takes its drivers with it; the next server to hold the database's lease resumes every run from
// its journal. Serve answers the API and drives the runs until the process is told to stop. A
// submitted run is planned and made as `rubberband run` makes one (planner.PlanRun,
// driver.Create). Start makes a server from `rubberband server`'s flags (its database, mirror
// and trainers' place), and the admin commands' work (AddUser, SaveTeam) is here too.
package server
