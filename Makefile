# rubberband: `make demo` plans the example job; `make test` runs every test.
GO      ?= go
BIN     := bin/rubberband
EXAMPLE ?= examples/quickstart.yaml
# What `rubberband --version` says: the commit, and whether the tree differed from it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# test pipes `go test -json` through cmd/testreport: pipefail keeps a failing suite failing.
SHELL   := /bin/bash

.PHONY: build test test-torch bench fidelity soak deps demo paper figures fuzz clean image search-bench

# The CLI and, beside it, the built-in trainers alone (rubberband-trainer), which the local
# runtime launches: they start in milliseconds where the whole CLI takes tens (static, without
# cgo: no dynamic loader at every start). Needs only Go: the servers of `make deps` are for the
# tests and the Nomad backend.
build:
	mkdir -p bin
	$(GO) build -ldflags "-X main.buildVersion=$(VERSION)" -o bin/ ./cmd/rubberband
	CGO_ENABLED=0 $(GO) build -o bin/ ./cmd/rubberband-trainer

# Everything the tests need: Go modules, and pinned MinIO and Nomad servers built into .tools/bin.
# Idempotent: a second run builds nothing.
deps:
	./scripts/deps.sh

# Every test, with the race detector; no test times anything against the wall clock (the run
# path's end-to-end claims hold in virtual time, `make fidelity` measures real runs), so packages
# run side by side, and the CLI's end-to-end tests (e2e) six at a time (-parallel 6: they mostly wait
# on trainers that sleep). The slowest 15 tests and packages are listed at the end, to keep the
# budget (15 minutes on 2 cores) in sight.
test: deps
	$(GO) vet ./...
	set -o pipefail; $(GO) test -race -count=1 -parallel 6 -timeout 30m -json ./... | $(GO) run ./cmd/testreport -slowest 15

# Opt-in, not part of `make test`: the PyTorch DDP trainer (examples/trainers/pytorch), unchanged,
# through `rubberband profile` and `rubberband run` on the local backend, on CPU with gloo; a trial
# migrates from one worker to two through its checkpoint. Installs Debian's python3-torch for
# /usr/bin/python3 first (scripts/torch.sh: about 650 MB, once).
test-torch:
	./scripts/torch.sh
	RB_TORCH=1 $(GO) test -count=1 -timeout 20m -run '^TestTorchTrainer$$' -v ./e2e

# Benchmarks of speed; fidelity and soak have targets of their own.
bench: deps
	$(GO) test -run '^$$' -bench . -skip 'Fidelity|Soak' -benchmem ./...

# Fidelity, measured: real runs on local processes, Nomad and the EC2 wire fake at compressed
# time, realized against predicted (a Hyperband job stage by stage, profiled first), calibration
# of the deadline's miss rate over 100 profiled runs (RB_CALIBRATION_RUNS) and spot over 5, each
# printed as a table (about 50 minutes; best on a quiet machine, since load is what it would
# measure).
fidelity: deps
	$(GO) test -run '^$$' -bench 'Fidelity' -benchtime 1x -timeout 90m ./e2e

# The long campaigns: 100,000 seeded fault schedules in virtual time, and two dozen real
# SIGKILLs of a driver, each resumed.
soak: deps
	$(GO) test -run '^TestFaultCampaign$$' -count=1 -timeout 60m ./executor/virtual -campaign 100000
	$(GO) test -run '^$$' -bench 'Soak' -benchtime 1x -timeout 30m ./e2e

# The main job on the embedded default: plan the example experiment (its elastic plan beside the
# best static cluster), then run it for real on local virtual nodes and report realized against
# predicted time and cost. Needs only Go.
demo: build
	./$(BIN) validate $(EXAMPLE)
	./$(BIN) plan $(EXAMPLE)
	rm -rf out/demo
	./$(BIN) run $(EXAMPLE) --state out/demo

# The paper's settings, every planner, beside the paper's figures (examples/paper/README.md).
paper: deps
	$(GO) run ./examples/paper/table

# The paper's simulated figures 9-12 as charts and CSV (examples/paper/whatif).
figures: build
	./examples/paper/whatif/figures.sh

fuzz: deps
	$(GO) test ./spec -run '^$$' -fuzz FuzzParse -fuzztime 60s

# The trainer image for the Nomad docker driver: a static binary in an image FROM scratch.
image:
	mkdir -p out/image
	CGO_ENABLED=0 $(GO) build -o out/image/rubberband ./cmd/rubberband
	docker build -t rubberband-trainer:latest -f examples/trainers/Dockerfile out/image

clean:
	rm -rf bin out .rubberband

# How good the search is: random, sobol and tpe (with BOHB's random fraction 1/3, and with 0.1)
# over 20 seeds on each benchmark objective, 16 Hyperband rounds, in virtual time, beside Optuna's
# TPE with its Hyperband pruner on the same objective and total iterations (Debian's
# python3-optuna, installed once by scripts/optuna.sh); two-objective benchmarks beside its
# multi-objective TPE and NSGA-II. Tables on stdout, charts in .bench/.
search-bench: build
	./scripts/optuna.sh
	$(BIN) search-bench --samplers 'random,sobol,tpe,tpe, random_fraction: 0.333' --seeds 20 --rounds 16 \
		--optuna .bench --optuna-script scripts/optuna_bench.py --plots .bench
	# digits trains the MLP for real (about 10 ms an epoch): four rounds, not sixteen.
	$(BIN) search-bench --objectives digits --samplers 'random,sobol,tpe' --seeds 20 --rounds 4 \
		--optuna .bench --optuna-script scripts/optuna_bench.py --plots .bench
	# Two objectives: hypervolume against Optuna's multi-objective TPE and NSGA-II.
	$(BIN) search-bench --objectives zdt1,curves-latency --samplers 'random,sobol,tpe' --seeds 20 --rounds 16 \
		--optuna .bench --optuna-script scripts/optuna_bench.py --plots .bench
	# cost_usd as an objective: as good a configuration, cheaper to train?
	$(BIN) search-bench cost --seeds 10 --rounds 16
