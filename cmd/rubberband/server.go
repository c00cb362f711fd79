package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

// dbFlag names the server's database; every subcommand that changes it takes it.
func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", EnvVars: []string{"RUBBERBAND_DB"}, DefaultText: "sqlite:ROOT/server.db",
		Usage: "the server's database: sqlite:PATH, or postgres://USER@HOST/DB (the password from PGPASSWORD or ~/.pgpass)"}
}

func serverCommand() *cli.Command {
	return &cli.Command{
		Name:  "server",
		Usage: "serve the API for teams: submitted specs are planned, held to their team's budget and quotas, queued and driven here (docs/server.md)",
		Description: "The server drives every run while it holds its database's lease; a second server on the same database\n" +
			"stands by and takes over when the first stops renewing it. Drivers are child processes of this binary,\n" +
			"resumed from their journals after a crash.",
		Flags: append([]cli.Flag{rootFlag(), dbFlag(), catalogFlag(),
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen on this address"},
			backendFlag("where runs go: " + driver.Names(nil) + ", as for run"),
			&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS with this certificate (PEM)"},
			&cli.StringFlag{Name: "tls-key", Usage: "and this key (PEM)"},
			&cli.DurationFlag{Name: "lease", Value: 15 * time.Second, Usage: "how long the driving server's lease lasts unrenewed: a stand-by takes over that long after it dies"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			&cli.IntFlag{Name: "max-queued-per-team", Value: server.DefaultMaxQueuedPerTeam, Usage: "runs a team may have queued at once, unless its own max_queued_runs says otherwise (0: no bound)"},
			&cli.IntFlag{Name: "max-queued-per-user", Value: server.DefaultMaxQueuedPerUser, Usage: "runs a user may have queued at once (0: no bound)"},
			&cli.BoolFlag{Name: "single-tenant", Usage: "every team trusts every other and this server: on the local backend, run trainers as this server's own user, unsandboxed (docs/server.md, Where trainers run)"},
			&cli.StringFlag{Name: "mirror", Usage: "copy the runs' folders where every server reaches them, so that runs move with the server: db (its database) or dir:PATH (a shared disk); --root is then this machine's copy"},
		}, httpFlags()...),
		Action: serverAction,
		Subcommands: []*cli.Command{
			{Name: "users", Usage: "the server's users", Subcommands: []*cli.Command{{
				Name: "add", Usage: "add a user to a team and print their token (shown this once)", ArgsUsage: "NAME",
				Flags: []cli.Flag{rootFlag(), dbFlag(), &cli.StringFlag{Name: "team", Required: true, Usage: "the user's team"},
					&cli.BoolFlag{Name: "admin", Usage: "may see every team's runs and manage teams and users"}},
				Action: usersAddAction,
			}}},
			{Name: "teams", Usage: "the server's teams: quotas and monthly budgets", Subcommands: []*cli.Command{
				{Name: "add", Usage: "add a team", ArgsUsage: "NAME", Flags: teamFlags(), Action: teamsAction(true)},
				{Name: "set", Usage: "change a team's quotas and budget", ArgsUsage: "NAME", Flags: teamFlags(), Action: teamsAction(false)},
			}},
		},
	}
}

// httpFlags bound what a client may hold of the server (server.HTTPLimits, its streams) and name
// the hosts its dashboard answers on.
func httpFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "public-url", Usage: "the address users reach the server at (https://rubberband.example:8443): the dashboard answers on its host name, and cookie-authenticated writes must come from it"},
		&cli.StringSliceFlag{Name: "allow-host", Usage: "another host name the dashboard answers on (repeatable); loopback names always are, any other is refused (DNS rebinding)"},
		&cli.DurationFlag{Name: "read-header-timeout", Value: server.DefaultReadHeaderTimeout, Usage: "close a connection whose request headers take longer"},
		&cli.DurationFlag{Name: "body-timeout", Value: server.DefaultBodyTimeout, Usage: "close a connection whose request body takes longer, from the end of its headers"},
		&cli.DurationFlag{Name: "idle-timeout", Value: server.DefaultIdleTimeout, Usage: "close a kept-alive connection idle this long"},
		&cli.IntFlag{Name: "max-conns-per-ip", Value: server.DefaultMaxConnsPerIP, Usage: "connections one client address may hold open (more are closed as accepted; -1: no bound; behind a proxy, the proxy is one address)"},
		&cli.IntFlag{Name: "max-conns", Value: server.DefaultMaxConns, Usage: "connections the server holds open from all addresses together (more are closed as accepted; -1: no bound)"},
		&cli.IntFlag{Name: "max-streams", Value: server.DefaultMaxStreams, Usage: "event and log streams the server holds open at once"},
		&cli.IntFlag{Name: "max-streams-per-user", Value: server.DefaultMaxStreamsPerUser, Usage: "event and log streams one user may hold open at once"},
	}
}

func teamFlags() []cli.Flag {
	return []cli.Flag{rootFlag(), dbFlag(),
		&cli.IntFlag{Name: "max-gpus", Usage: "GPUs the team's running runs may hold at once (0: no bound)"},
		&cli.IntFlag{Name: "max-nodes", Usage: "nodes the team's running runs may hold at once (0: no bound)"},
		&cli.Float64Flag{Name: "budget", Usage: "dollars the team's runs may be charged in a calendar month, UTC (0: no budget)"},
		&cli.IntFlag{Name: "max-queued-runs", Usage: "runs the team may have queued at once (0: the server's --max-queued-per-team)"},
		&cli.StringSliceFlag{Name: "storage-prefix", Usage: "where the team's runs may keep checkpoints and read warm starts: file:///DIR or s3://BUCKET/PREFIX, repeated; given to set, it replaces them ('' removes them all)"},
	}
}

func serverAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return driver.UsageError("server takes no arguments; `rubberband server users add` and `teams add` manage it")
	}
	srv, err := server.Start(c.Context, server.Setup{DB: c.String("db"), Mirror: c.String("mirror"), TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
		Limits: server.HTTPLimits{ReadHeaderTimeout: c.Duration("read-header-timeout"), BodyTimeout: c.Duration("body-timeout"),
			IdleTimeout: c.Duration("idle-timeout"), MaxConnsPerIP: c.Int("max-conns-per-ip"), MaxConns: c.Int("max-conns")},
		PublicURL: c.String("public-url"), AllowHosts: c.StringSlice("allow-host"),
		Catalog: func() (spec.InstanceCatalog, error) { return effectiveCatalog(c) },
		Config: server.Config{Root: c.String("root"), Backend: c.String("backend"), TimeScale: c.Float64("time-scale"), LeaseTTL: c.Duration("lease"),
			Log: c.App.ErrWriter, SingleTenant: c.Bool("single-tenant"), MaxStreams: c.Int("max-streams"), MaxStreamsPerUser: c.Int("max-streams-per-user"),
			QueueLimits: server.QueueLimits{PerTeam: c.Int("max-queued-per-team"), PerUser: c.Int("max-queued-per-user")}}})
	if fe := (*server.FlagError)(nil); errors.As(err, &fe) {
		return driver.UsageError("%v", fe)
	} else if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", c.String("addr"))
	if err != nil {
		return driver.UsageError("listen on %s: %v", c.String("addr"), err)
	}
	scheme, copies := "http", ""
	if c.String("tls-cert") != "" {
		scheme = "https"
	}
	if srv.Mirrored {
		copies = ", mirrored to " + c.String("mirror")
	}
	if srv.Kind.LocalTrainers {
		fmt.Fprintf(c.App.ErrWriter, "rubberband server: trainers %s\n", srv.Trainers.Where)
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband server: %s://%s, runs under %s%s, backend %s, database %s\n", scheme, ln.Addr(), srv.Root, copies, c.String("backend"), srv.Store.Describe())
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Serve(ctx, ln, srv.Limits, c.String("tls-cert"), c.String("tls-key"))
}

// onStore runs fn on the command's database with its one NAME argument; what the user must
// change (an unknown team, a name taken or malformed) exits 2.
func onStore(c *cli.Context, fn func(st store.Store, name string) error) error {
	if c.NArg() != 1 {
		return driver.UsageError("%s needs exactly one NAME", c.Command.HelpName)
	}
	st, _, err := server.OpenStore(c.Context, c.String("db"), c.String("root"))
	if err != nil {
		return err
	}
	defer st.Close()
	if err = fn(st, c.Args().First()); server.IsUserError(err) {
		return driver.UsageError("%v", err)
	}
	return err
}

func usersAddAction(c *cli.Context) error {
	return onStore(c, func(st store.Store, name string) error {
		token, err := server.AddUser(c.Context, st, name, c.String("team"), c.Bool("admin"), time.Now(), server.CLIActor())
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "added %s to team %s; their token, shown this once:\n", name, c.String("team"))
		fmt.Fprintln(c.App.Writer, token)
		return nil
	})
}

// teamsAction adds a team, or changes only the limits a set names of one.
func teamsAction(create bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		return onStore(c, func(st store.Store, name string) error {
			ch := server.TeamChange{MaxGPUs: setFlag(c, "max-gpus", c.Int), MaxNodes: setFlag(c, "max-nodes", c.Int),
				MonthlyBudgetUSD: setFlag(c, "budget", c.Float64), MaxQueuedRuns: setFlag(c, "max-queued-runs", c.Int)}
			if c.IsSet("storage-prefix") {
				prefixes := slices.DeleteFunc(c.StringSlice("storage-prefix"), func(p string) bool { return p == "" })
				ch.StoragePrefixes = &prefixes
			}
			t, err := server.SaveTeam(c.Context, st, name, ch, create, time.Now(), server.CLIActor())
			if err == nil {
				fmt.Fprintf(c.App.ErrWriter, "team %s: %s\n", t.Name, server.TeamDetail(t))
			}
			return err
		})
	}
}
