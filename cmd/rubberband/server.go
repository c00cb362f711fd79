package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
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
		Flags: []cli.Flag{rootFlag(), dbFlag(), catalogFlag(),
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen on this address"},
			backendFlag("where runs go: local, nomad, ec2 or virtual, as for run"),
			&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS with this certificate (PEM)"},
			&cli.StringFlag{Name: "tls-key", Usage: "and this key (PEM)"},
			&cli.DurationFlag{Name: "lease", Value: 15 * time.Second, Usage: "how long the driving server's lease lasts unrenewed: a stand-by takes over that long after it dies"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			&cli.BoolFlag{Name: "single-tenant", Usage: "every team trusts every other and this server: on the local backend, run trainers as this server's own user, unsandboxed (docs/server.md, Where trainers run)"},
			&cli.StringFlag{Name: "mirror", Usage: "copy the runs' folders where every server reaches them, so that runs move with the server: db (its database) or dir:PATH (a shared disk); --root is then this machine's copy"},
		},
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

func teamFlags() []cli.Flag {
	return []cli.Flag{rootFlag(), dbFlag(),
		&cli.IntFlag{Name: "max-gpus", Usage: "GPUs the team's running runs may hold at once (0: no bound)"},
		&cli.IntFlag{Name: "max-nodes", Usage: "nodes the team's running runs may hold at once (0: no bound)"},
		&cli.Float64Flag{Name: "budget", Usage: "dollars the team's runs may be charged in a calendar month, UTC (0: no budget)"},
	}
}

// openStore opens the command's database, making the root folder for the default one.
func openStore(c *cli.Context) (*sqlstore.Store, error) {
	url, err := dbURL(c)
	if err != nil {
		return nil, err
	}
	return sqlstore.Open(c.Context, url)
}

// dbURL is the command's database, sqlite:ROOT/server.db by default (its folder made); a SQLite
// path is made absolute, so that the server's drivers open the same file.
func dbURL(c *cli.Context) (string, error) {
	url := c.String("db")
	if url == "" {
		root := c.String("root")
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", err
		}
		url = "sqlite:" + filepath.Join(root, "server.db")
	}
	return sqlstore.AbsURL(url)
}

// serverMirror is the server's --mirror: nil without one.
func serverMirror(c *cli.Context, st *sqlstore.Store) (*server.Mirror, error) {
	url, err := dbURL(c)
	if err != nil {
		return nil, err
	}
	m, err := server.MirrorFor(c.String("mirror"), url, st)
	if errors.Is(err, server.ErrMirrorFlag) {
		return nil, usageErr("--mirror: %v", err)
	}
	return m, err
}

func serverAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("server takes no arguments; `rubberband server users add` and `teams add` manage it")
	}
	if (c.String("tls-cert") == "") != (c.String("tls-key") == "") {
		return usageErr("--tls-cert and --tls-key go together")
	}
	backend := c.String("backend")
	if !driver.Known(backend) {
		return usageErr("--backend %q: local, nomad, ec2 or virtual", backend)
	}
	root, err := filepath.Abs(c.String("root"))
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	cat, err := effectiveCatalog(c)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	wd, _ := os.Getwd()
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s:%d:%x", host, os.Getpid(), time.Now().UnixNano()&0xffffff)
	mirrored, err := serverMirror(c, st)
	if err != nil {
		return err
	}
	if mirrored != nil && backend == driver.Virtual {
		return usageErr("--mirror: a virtual run is not mirrored; use local, nomad or ec2")
	}
	env := []string{"RUBBERBAND_BACKEND=" + backend, "RUBBERBAND_ROOT=" + root}
	sandbox, sandboxed, whyNot := serverSandbox(backend, c.Bool("single-tenant"))
	if sandbox != nil {
		if err := process.Reachable(root, root); err != nil {
			return usageErr("--root: %v", err)
		}
	}
	srv := server.New(server.Config{Store: st, Root: root, Backend: backend, TimeScale: c.Float64("time-scale"), Catalog: cat,
		Holder: holder, LeaseTTL: c.Duration("lease"), Log: c.App.ErrWriter, Sandbox: sandbox, SingleTenant: c.Bool("single-tenant"),
		Supervisor: &server.Supervisor{Binary: self, Dir: wd, Env: env, Mirror: mirrored, Log: c.App.ErrWriter}})
	defer srv.Close()
	if err := srv.CheckTenancy(c.Context); errors.Is(err, server.ErrUnsandboxed) {
		return usageErr("%v (here %v)", err, whyNot)
	} else if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("addr"))
	if err != nil {
		return usageErr("listen on %s: %v", c.String("addr"), err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 2)
	go func() {
		if c.String("tls-cert") != "" {
			errc <- hs.ServeTLS(ln, c.String("tls-cert"), c.String("tls-key"))
			return
		}
		errc <- hs.Serve(ln)
	}()
	scheme := "http"
	if c.String("tls-cert") != "" {
		scheme = "https"
	}
	copies := ""
	if mirrored != nil {
		copies = ", mirrored to " + c.String("mirror")
	}
	if backend == driver.Local {
		fmt.Fprintf(c.App.ErrWriter, "rubberband server: trainers %s\n", sandboxed)
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband server: %s://%s, runs under %s%s, backend %s, database %s\n", scheme, ln.Addr(), root, copies, backend, st.Describe())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	// Run stops the drivers, copies what they left to the mirror and gives the lease up: the
	// database stays open until it has.
	stop()
	<-ran
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	srv.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return nil
}

// serverSandbox is the sandbox range of a server's local runs (nil: none), a phrase that says
// where its trainers run, and why they cannot be sandboxed, if they cannot.
func serverSandbox(backend string, singleTenant bool) (*process.SandboxRange, string, error) {
	switch err := process.CanSandbox(); {
	case backend != driver.Local:
		return nil, "run on the " + backend + " backend's nodes", nil
	case singleTenant:
		return nil, "run as this server's own user (--single-tenant)", nil
	case err != nil:
		return nil, fmt.Sprintf("run as this server's own user (%v)", err), err
	default:
		rg := process.DefaultSandboxRange
		return &rg, fmt.Sprintf("run sandboxed, a uid per run from %d", rg.First), nil
	}
}

// onStore runs fn on the command's database with its one NAME argument; what the user must
// change (an unknown team, a name taken or malformed) exits 2.
func onStore(c *cli.Context, fn func(st store.Store, name string) error) error {
	if c.NArg() != 1 {
		return usageErr("%s needs exactly one NAME", c.Command.HelpName)
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	err = fn(st, c.Args().First())
	var in *server.InputError
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrInvalid) || errors.As(err, &in) {
		return usageErr("%v", err)
	}
	return err
}

func usersAddAction(c *cli.Context) error {
	return onStore(c, func(st store.Store, name string) error {
		token, err := server.AddUser(c.Context, st, name, c.String("team"), c.Bool("admin"), time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "added %s to team %s; their token, shown this once:\n", name, c.String("team"))
		fmt.Fprintln(c.App.Writer, token)
		return nil
	})
}

func teamsAction(create bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		return onStore(c, func(st store.Store, name string) error {
			t := store.Team{Name: name, MaxGPUs: c.Int("max-gpus"), MaxNodes: c.Int("max-nodes"), MonthlyBudgetUSD: c.Float64("budget"), CreatedAt: time.Now()}
			if err := server.CheckTeam(t); err != nil {
				return &server.InputError{Err: err}
			}
			var err error
			if create {
				err = st.CreateTeam(c.Context, t)
			} else {
				err = st.UpdateTeam(c.Context, t)
			}
			if err == nil {
				fmt.Fprintf(c.App.ErrWriter, "team %s: max_gpus %d, max_nodes %d, monthly budget $%.2f\n", t.Name, t.MaxGPUs, t.MaxNodes, t.MonthlyBudgetUSD)
			}
			return err
		})
	}
}
