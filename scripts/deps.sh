#!/usr/bin/env bash
# Installs what the tests need, once: Go modules, pinned MinIO, Nomad, etcd and kube-apiserver
# servers built from the Go module proxy into .tools/bin (ignored by git), Karpenter's NodeClaim
# CRD into .tools/kube, and Debian's Chromium and PostgreSQL when missing. A second run builds and installs nothing.
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

# Kubernetes: kube-apiserver, etcd, kube-controller-manager and kube-scheduler for the kube backend's tests, pinned in the nested tool module
# tools/kube (k8s.io/kubernetes with its staging modules replaced by their published versions;
# etcd at the version Kubernetes itself requires). Pure Go, no cgo. About ten minutes from cold
# caches on 2 cores.
KUBE_VERSION=$(awk '/k8s.io\/kubernetes v/ {print $2; exit}' tools/kube/go.mod)
ETCD_VERSION=$(awk '/go.etcd.io\/etcd\/server\/v3 v/ {print $2; exit}' tools/kube/go.mod)
build_kube() { # name package version
  if [ ! -x "$bin/$1" ] || [ "$(cat "$bin/$1.version" 2>/dev/null)" != "$3" ]; then
    echo "deps: building $1 $3 (minutes from cold caches)"
    (cd tools/kube && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o "$bin/$1" "$2")
    echo "$3" > "$bin/$1.version"
  fi
}
build_kube etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
build_kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$KUBE_VERSION"
# The Deployment controller and the scheduler, for the test of the server deployed on Kubernetes.
build_kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$KUBE_VERSION"
build_kube kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$KUBE_VERSION"

# Karpenter's NodeClaim CRD (karpenter.sh/v1), from the sigs.k8s.io/karpenter module: the kube
# backend's elastic provider creates NodeClaims, and its tests install the CRD into the test API
# server. (Newer versions need a newer Go than 1.26.8.)
KARPENTER_VERSION=v1.14.1
crds="$PWD/.tools/kube/crds"
if [ "$(cat "$crds/version" 2>/dev/null)" != "$KARPENTER_VERSION" ]; then
  dir=$(go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" | awk -F'"' '/"Dir":/ {print $4}')
  mkdir -p "$crds"
  cp "$dir/pkg/apis/crds/karpenter.sh_nodeclaims.yaml" "$crds/"
  chmod 644 "$crds"/*.yaml
  echo "$KARPENTER_VERSION" > "$crds/version"
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
