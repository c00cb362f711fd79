package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
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
			if c.NArg() > 1 {
				return driver.UsageError("kube-rbac takes at most one SPEC argument (got %d)", c.NArg())
			}
			a := admit.Access{Namespace: "default", ServiceAccount: c.String("service-account"), Nodes: spec.KubeNodesPool}
			if c.NArg() == 1 {
				exp, _, err := loadSpec(c, c.App.ErrWriter, spec.ProfileOptional()) // RBAC is the same before a profile
				if err != nil {
					return err
				}
				if k := exp.Cluster.Kubernetes; k != nil {
					a.Nodes, a.LeaseNamespace = k.KubeNodes(), k.LeaseNamespace
					if k.Namespace != "" {
						a.Namespace = k.Namespace
					}
				}
			}
			if ns := c.String("namespace"); ns != "" {
				a.Namespace = ns
			}
			if n := c.String("nodes"); n != "" {
				if n != spec.KubeNodesPool && n != spec.KubeNodesKarpenter {
					return driver.UsageError("--nodes %q is neither %s nor %s", n, spec.KubeNodesPool, spec.KubeNodesKarpenter)
				}
				a.Nodes = n
			}
			objs := admit.Objects(a)
			if c.String("output") == "json" {
				return format.JSON(c.App.Writer, map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
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
