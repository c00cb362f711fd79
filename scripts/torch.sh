#!/usr/bin/env bash
# Installs PyTorch for /usr/bin/python3 from Debian (python3-torch, CPU only: about 150 MB to
# download, 650 MB on disk), once: a second run finds `import torch` working and installs nothing.
# For `make test-torch`, which runs examples/trainers/pytorch through `rubberband run`.
set -euo pipefail
if /usr/bin/python3 -c 'import torch, torch.distributed as d; assert d.is_available()' 2>/dev/null; then
  echo "torch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') already importable by /usr/bin/python3"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "torch: no apt-get here: install PyTorch for /usr/bin/python3 yourself (pip install torch)" >&2
  exit 1
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "torch: installing python3-torch needs root (or sudo)" >&2; exit 1; }
  sudo=sudo
fi
echo "torch: installing Debian's python3-torch (a few minutes)"
$sudo apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch
/usr/bin/python3 -c 'import torch; print("torch:", torch.__version__, "installed")'
