# rubberband: `make demo` plans the example job; `make test` runs every test.
GO      ?= go
BIN     := bin/rubberband
EXAMPLE ?= examples/quickstart.yaml
# What `rubberband --version` says: the commit, and whether the tree differed from it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build test test-torch bench deps demo paper figures fuzz clean image

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

# One package at a time (-p 1): the fidelity tests time real runs against predictions, and a
# second package's tests on the same two cores would skew what they measure.
test: deps
	$(GO) vet ./...
	$(GO) test -race -p 1 -count=1 -timeout 60m ./...

# Opt-in, not part of `make test`: the PyTorch DDP trainer (examples/trainers/pytorch), unchanged,
# through `rubberband profile` and `rubberband run` on the local backend, on CPU with gloo; a trial
# migrates from one worker to two through its checkpoint. Installs Debian's python3-torch for
# /usr/bin/python3 first (scripts/torch.sh: about 650 MB, once).
test-torch:
	./scripts/torch.sh
	RB_TORCH=1 $(GO) test -count=1 -timeout 20m -run '^TestTorchTrainer$$' -v ./cmd/rubberband

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

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
