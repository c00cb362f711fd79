# rubberband server as a Nomad service job (docs/server.md, "Deploy on Nomad").
#
#   nomad job run -var db=postgres://rubberband@db.internal/rubberband examples/deploy/server.nomad.hcl
#
# The server keeps nothing of its own on the client it runs on: teams, users, runs and the lease
# are in PostgreSQL, and so is a copy of every run's folder (--mirror db: the journal copied at
# each sync, before the driver acts on it; logs and reports every second). Its --root is a
# scratch copy inside the allocation. So when its allocation stops (a drain, a lost client, a
# deploy) Nomad places it anywhere else, the new server takes the database's lease, restores
# each running run's folder from the database and resumes it from its journal. The runs'
# checkpoints must be where every client reaches them (checkpoints.url: s3://…): the server
# refuses a spec that would keep them in the run's folder.
#
# Secrets never appear here: every key of the Nomad Variable nomad/jobs/rubberband-server
# becomes the server's environment (PGPASSWORD, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY for
# the checkpoint store…).

variable "binary" {
  type        = string
  default     = "/usr/local/bin/rubberband"
  description = "the rubberband binary on every client (or run the image with the docker driver)"
}

variable "db" {
  type        = string
  description = "the server's PostgreSQL database, postgres://USER@HOST/DB (no password here)"
}

variable "root" {
  type        = string
  default     = "local/runs"
  description = "the runs' folder: with mirror, this machine's copy (relative: in the allocation); without, a folder every client mounts at the same path"
}

variable "mirror" {
  type        = string
  default     = "db"
  description = "where the runs' folders are copied so that the server can move: db, dir:PATH (a shared disk), or \"\" (then root must be shared)"
}

variable "backend" {
  type    = string
  default = "nomad"
}

variable "lease" {
  type    = string
  default = "15s"
}

variable "time_scale" {
  type        = string
  default     = "1"
  description = "wall seconds per spec second for emulated latencies (tests only)"
}

variable "secrets_variable" {
  type        = bool
  default     = true
  description = "put every key of the Nomad Variable nomad/jobs/rubberband-server in the server's environment"
}

job "rubberband-server" {
  type = "service"

  group "server" {
    count = 1

    network {
      port "http" {}
    }

    service {
      name     = "rubberband"
      port     = "http"
      provider = "nomad"
      check {
        type     = "http"
        path     = "/api/v1/health"
        interval = "10s"
        timeout  = "2s"
      }
    }

    # A server that fails is restarted in place, then placed elsewhere, always.
    restart {
      attempts = 2
      interval = "5m"
      delay    = "5s"
      mode     = "fail"
    }
    reschedule {
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = var.binary
        args = concat(["server", "--addr", "${NOMAD_ADDR_http}", "--db", var.db, "--root", var.root,
          "--backend", var.backend, "--lease", var.lease, "--time-scale", var.time_scale],
        var.mirror == "" ? [] : ["--mirror", var.mirror])
      }

      # SIGINT: the server stops its drivers (they go on under the next server) and gives the
      # lease up at once, so that the next takes over without waiting for it to expire.
      kill_signal  = "SIGINT"
      kill_timeout = "20s"

      dynamic "template" {
        for_each = var.secrets_variable ? [1] : []
        content {
          data        = "{{ with nomadVar \"nomad/jobs/rubberband-server\" }}{{ range $k, $v := . }}{{ $k }}={{ $v }}\n{{ end }}{{ end }}"
          destination = "secrets/server.env"
          env         = true
        }
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
