# rubberband server as a Nomad service job (docs/server.md, "Deploy on Nomad").
#
#   nomad job run -var db=postgres://rubberband@db.internal/rubberband -var root=/shared/rubberband \
#     examples/deploy/server.nomad.hcl
#
# The server keeps nothing of its own on the client it runs on: teams, users, runs and the lease
# are in PostgreSQL, the runs' state directories (journals, logs, checkpoints) under `root`, a
# folder every client mounts (NFS, EFS, a CSI volume). So when its allocation stops (a drain, a
# lost client, a deploy) Nomad places it elsewhere, the new server takes the database's lease and
# resumes every running run from its journal. The database's password comes from the Nomad
# Variable nomad/jobs/rubberband-server (key pgpassword), never from this file.

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
  description = "the runs' folder, the same path on every client that may run the server"
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

variable "password_variable" {
  type        = bool
  default     = true
  description = "read PGPASSWORD from the Nomad Variable nomad/jobs/rubberband-server"
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
        args = ["server", "--addr", "${NOMAD_ADDR_http}", "--db", var.db, "--root", var.root,
        "--backend", var.backend, "--lease", var.lease, "--time-scale", var.time_scale]
      }

      # SIGINT: the server stops its drivers (they go on under the next server) and gives the
      # lease up at once, so that the next takes over without waiting for it to expire.
      kill_signal  = "SIGINT"
      kill_timeout = "20s"

      dynamic "template" {
        for_each = var.password_variable ? [1] : []
        content {
          data        = "{{ with nomadVar \"nomad/jobs/rubberband-server\" }}PGPASSWORD={{ .pgpassword }}{{ end }}"
          destination = "secrets/db.env"
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
