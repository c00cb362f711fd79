#!/usr/bin/env bash
# Installs Optuna for /usr/bin/python3 from Debian (python3-optuna, 3.1), once: a second run finds
# `import optuna` working and installs nothing. For `make search-bench`, which runs
# scripts/optuna_bench.py beside rubberband's samplers.
set -euo pipefail
if /usr/bin/python3 -c 'import optuna' 2>/dev/null; then
  echo "optuna: $(/usr/bin/python3 -c 'import optuna; print(optuna.__version__)') already importable by /usr/bin/python3"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "optuna: no apt-get here: install Optuna for /usr/bin/python3 yourself (pip install optuna)" >&2
  exit 1
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "optuna: installing python3-optuna needs root (or sudo)" >&2; exit 1; }
  sudo=sudo
fi
echo "optuna: installing Debian's python3-optuna"
$sudo apt-get update -q
$sudo apt-get install -y -q python3-optuna
