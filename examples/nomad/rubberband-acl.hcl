# The ACL policy of the token rubberband runs with on a team's Nomad cluster (docs/nomad.md, "ACLs"):
# exactly what it uses, nothing more. Replace "default" with the namespace NOMAD_NAMESPACE names.
#
#   nomad acl policy apply -description "rubberband runs" rubberband examples/nomad/rubberband-acl.hcl
#   nomad acl token create -name rubberband -policy rubberband
#
# TestRunOnTeamNomadCluster runs a whole run and a profile with a token of this policy alone.

namespace "default" {
  capabilities = [
    "list-jobs",       # find the jobs of a run a dead driver left (resume)
    "read-job",        # a gang's job, its allocations and evaluations
    "submit-job",      # plan, register and purge a gang's job
    "alloc-lifecycle", # signal a gang's workers to stop (they save their checkpoints)
    "read-logs",       # rank 0's reports, and every worker's output into the trial's log
  ]

  variables {
    # Claims on the team's clients (cluster.nomad): one variable per claimed client.
    path "rubberband/claims/*" {
      capabilities = ["write", "read", "list", "destroy"]
    }
    # The checkpoint store's credentials of a trainer.image gang, readable by its job only.
    path "nomad/jobs/rb-*" {
      capabilities = ["write", "read", "list", "destroy"]
    }
  }
}

# List the clients and read their pool, class, meta and devices (which ones match cluster.nomad).
node {
  policy = "read"
}
