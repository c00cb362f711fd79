package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/ui"
	"github.com/urfave/cli/v2"
)

func uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "serve a web dashboard of the runs under the root: live progress, schedules, costs, plans",
		Description: "Binds loopback only unless --addr says otherwise; any other address needs a token (--token,\n" +
			"or one is generated and printed), checked on every request. Read-only unless --allow-cancel.",
		Flags: []cli.Flag{rootFlag(),
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on (host:port; port 0 picks a free one)"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"RUBBERBAND_UI_TOKEN"}, Usage: "require this token on every request (generated when the address is not loopback)"},
			&cli.BoolFlag{Name: "allow-cancel", Usage: "show a cancel button on live runs (it does what rubberband cancel does)"},
		},
		Action: uiAction,
	}
}

func uiAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return driver.UsageError("ui takes no arguments (--root chooses the folder)")
	}
	root := c.String("root")
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return driver.UsageError("--root %s is not a folder (it holds the runs: `rubberband run SPEC --root %s` makes one)", root, root)
	}
	ln, token, url, err := ui.Listen(c.String("addr"), c.String("token"))
	if err != nil {
		return driver.UsageError("%v", err)
	}
	srv, err := ui.New(ui.Config{Root: root, Token: token, AllowCancel: c.Bool("allow-cancel"), Cancel: driver.CancelDir, Log: c.App.ErrWriter})
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	fmt.Fprintf(c.App.ErrWriter, "rubberband ui: serving the runs under %s on %s\n", root, url)
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Serve(ctx, ln)
}
