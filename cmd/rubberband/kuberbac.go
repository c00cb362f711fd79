package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

func kubeRBACCommand() *cli.Command {
	return &cli.Command{
		Name:      "kube-rbac",
		Usage:     "the least-privilege Role and ClusterRole of the driver on Kubernetes (--backend kube)",
		ArgsUsage: "[SPEC]",
		Description: "Prints the RBAC objects that allow what rubberband's driver asks of a Kubernetes cluster, and nothing\n" +
			"else, bound to a ServiceAccount: in the run's namespace pods, their logs, the run's Secret and the\n" +
			"quotas; on the cluster reading nodes and pods (free GPUs, reclaimed nodes); and Leases on a pool's\n" +
			"nodes or, with nodes: karpenter, NodeClaims. SPEC's cluster.kubernetes gives the namespaces and\n" +
			"where nodes come from; flags override it. Apply with `rubberband kube-rbac SPEC | kubectl apply -f -`.\n" +
			"Nothing is asked of the cluster.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: "the run's namespace (default: the spec's, else default)"},
			&cli.StringFlag{Name: "service-account", Value: "rubberband", Usage: "the driver's ServiceAccount"},
			&cli.StringFlag{Name: "nodes", Usage: "where nodes come from: pool or karpenter (default: the spec's, else pool)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "yaml", Usage: "yaml or json"},
		},
		Action: func(c *cli.Context) error {
			if o := c.String("output"); o != "yaml" && o != "json" {
				return driver.UsageError("--output %q is not a format (yaml or json)", o)
			}
			exp, err := optionalSpec(c)
			if err != nil {
				return err
			}
			a, err := admit.For(exp, c.String("service-account"), c.String("namespace"), c.String("nodes"))
			if err != nil {
				return driver.UsageError("%v", err)
			}
			objs := admit.Objects(a)
			if c.String("output") == "json" {
				return format.JSON(c.App.Writer, admit.List(objs))
			}
			y, err := admit.Manifest(a, objs)
			if err != nil {
				return err
			}
			_, err = c.App.Writer.Write(y)
			return err
		},
	}
}
