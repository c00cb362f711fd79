#!/usr/bin/env bash
# Installs what the tests need, once: Go modules, pinned MinIO and Nomad servers built from the
# Go module proxy into .tools/bin (ignored by git), and Debian's Chromium and PostgreSQL when
# missing. A second run builds and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/.tools/bin"
mkdir -p "$bin"

go mod download

# MinIO: the only version the module proxy serves (shared/NOMAD.md).
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
if [ ! -x "$bin/minio" ] || [ "$(cat "$bin/minio.version" 2>/dev/null)" != "$MINIO_VERSION" ]; then
  echo "deps: building minio $MINIO_VERSION (a few minutes from cold caches)"
  GOBIN="$bin" GOFLAGS=-buildvcs=false go install "github.com/minio/minio@$MINIO_VERSION"
  echo "$MINIO_VERSION" > "$bin/minio.version"
fi

# Nomad: pinned in the nested tool module tools/nomad (its go.mod and go.sum are committed).
NOMAD_VERSION=$(awk '/hashicorp\/nomad v/ {print $2; exit}' tools/nomad/go.mod)
if [ ! -x "$bin/nomad" ] || [ "$(cat "$bin/nomad.version" 2>/dev/null)" != "$NOMAD_VERSION" ]; then
  echo "deps: building nomad $NOMAD_VERSION (a few minutes from cold caches; cgo)"
  (cd tools/nomad && CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -o "$bin/nomad" github.com/hashicorp/nomad)
  echo "$NOMAD_VERSION" > "$bin/nomad.version"
fi

# Chromium, for the dashboard's browser tests (chromedp drives it headless): Debian's package,
# when none is on PATH. CI runs this as root on a fresh Debian machine.
if ! command -v chromium >/dev/null 2>&1; then
  echo "deps: installing chromium (Debian package)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium
fi

# PostgreSQL 15, for the server store's tests (internal/testkit/servers starts a throwaway cluster):
# Debian's package, when its binaries are missing. Only the binaries are used; the cluster the
# package may create and start is left alone.
if [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then
  echo "deps: installing postgresql (Debian package)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends postgresql
fi
