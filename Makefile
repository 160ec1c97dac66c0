# etcdfed: `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/etcdfed/etcdfed/internal/version.Version=$(VERSION)
TEST_TIMEOUT ?= 28m
# Extra flags for go test, e.g. TESTFLAGS='-run TestX -v'. make test always runs
# (-count=1): results of tests that start processes must never come from
# the cache.
TESTFLAGS ?=
# The longest package first: go test builds and runs packages in the order
# given (two at a time on two cores), so the multi-cluster tests (about
# 16 minutes) start while the rest are still being built and run beside
# them, instead of last.
TEST_PKGS ?= ./test/multicluster ./...
BENCHTIME ?= 1s

export ETCDFED_BIN_DIR := $(BIN)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build hub, spoke and the etcdfed CLI into bin/.
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: ## Build every pinned tool into bin/ (kube-apiserver, kubectl, etcd 3.6 and 3.5, etcdctl, etcdutl, controller-gen, golangci-lint, versitygw; only what is missing).
	hack/tools.sh

# The tools each purpose runs, so that a first `make demo` builds only what
# the demo runs, and `make test` not the generators and linters.
.PHONY: tools-demo tools-test
tools-demo: ## Build the tools `make demo` runs (kube-apiserver, etcd, etcdctl).
	hack/tools.sh --for demo
tools-test: ## Build the tools the tests run (all but controller-gen and golangci-lint).
	hack/tools.sh --for test

.PHONY: system-deps
system-deps: ## Install the Debian packages tests use (bind9, dnsutils, dnsperf, iptables) when missing.
	hack/system-deps.sh

.PHONY: generate
generate: ## Generate deepcopy code and CRDs.
	hack/tools.sh controller-gen
	$(BIN)/controller-gen object:headerFile="" paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	$(GO) generate ./config/...

.PHONY: verify
verify: generate ## Check generated files are current, gofmt, go vet, golangci-lint.
	@git diff --exit-code -- api config || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go')); [[ -z "$$out" ]] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet ./...
	hack/tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...

##@ Run

# DETACH=1: return once the demo EtcdCluster is Available, leaving the
# environment running until `bin/etcdfed dev down`.
DETACH ?=
DEMO_FLAGS ?= --clusters 3 --members 5

# The demo installs iptables when it can (root with apt-get) and runs
# without it otherwise; `etcdfed dev up` says in its first line what the
# environment could not do and what it does instead.
# NODES=real: real nodes (kubelet, containerd and runc per node; the hub and
# the spokes deployed in-cluster from config/), as root; see
# docs/local-environment.md.
NODES ?=
.PHONY: demo
demo: tools-demo build $(if $(filter real,$(NODES)),realnode-deps) ## Local hub + 3 member clusters, a 5-member etcd over 3 zones, formed by etcdfed (DETACH=1 to background, NODES=real for real nodes).
	hack/system-deps.sh demo
	$(BIN)/etcdfed dev up $(DEMO_FLAGS) $(if $(NODES),--nodes $(NODES)) $(if $(DETACH),--detach)

.PHONY: realnode-deps
realnode-deps: ## What real nodes run: kubelet, scheduler, controller manager, kube-proxy, containerd, CoreDNS besides the test tools (hack/tools.sh --for realnodes), runc and the CNI plugins (Debian).
	hack/tools.sh --for realnodes
	hack/system-deps.sh realnodes

##@ Test

# hack/leftovers first: processes an earlier run left behind are reported,
# and stopped where its records prove a test binary that is gone started them.
.PHONY: test
test: tools-test system-deps build ## Run every test: unit, integration (real apiservers) and multicluster (real etcd, real DNS).
	$(GO) run ./hack/leftovers
	$(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(TEST_PKGS) | $(GO) run ./hack/testsummary

.PHONY: drill
drill: tools-test system-deps build ## Drills too long for `make test`: the hub killed at every step of an add and a replace, DRILL_RUNS times (default 10) under CPU load.
	ETCDFED_DRILL=1 ETCDFED_DRILL_RUNS=$(or $(DRILL_RUNS),10) ETCDFED_DRILL_CPU_BURN=2 ETCDFED_DRILL_PAUSE=3s $(GO) test -count=1 -timeout 120m -v -run 'TestHubRestartAtEveryStep' ./test/multicluster

# SCENARIOS picks scenarios by test name (a go test -run pattern).
SCENARIOS ?= ^TestScenario
.PHONY: scenarios
scenarios: tools-test system-deps build ## Every scenario too long for `make test` (failures, upgrades, defragmentation, certificates, backups, recovery), each under a recorded workload (SCENARIOS to pick).
	ETCDFED_SCENARIOS=1 $(GO) test -count=1 -timeout 120m -v -run '$(SCENARIOS)' ./test/multicluster

# The failure scenarios (issue 13's list) and one run of the hub-kill
# drill: about 20 minutes, run by .ci/run after `make test`.
FAILURE_SCENARIOS := ^TestScenario(VolumeLost|CrashLoop|ZoneDrained|StartGivenUp|LeaderZoneKilledAndReturned|HubPartitioned|HubDownZoneKilled|ZoneOfMultiZoneClusterKilled)$$
.PHONY: failures
failures: tools-test system-deps build ## The failure scenarios (lost volume, crash loop, a zone drained, a volume lost in a drained zone (the start given up), the leader's zone killed and returned, hub partitioned, hub down during a zone kill, a zone of a multi-zone cluster) and one hub-kill drill run.
	$(MAKE) scenarios SCENARIOS='$(FAILURE_SCENARIOS)'
	$(MAKE) drill DRILL_RUNS=1

# REALNODES picks the real-node tests by name (a go test -run pattern).
REALNODES ?= ^TestRealNodes
.PHONY: test-realnodes
test-realnodes: realnode-deps build ## The TestRealNodes* scenarios on real nodes (root): kubelet, containerd and runc per node, the hub and the spokes in-cluster from config/, each under a recorded workload (REALNODES to pick).
	ETCDFED_REALNODES=1 $(GO) test -count=1 -timeout 100m -v -run '$(REALNODES)' ./test/multicluster

.PHONY: test-unit
test-unit: ## Run unit tests only (-short: tests needing processes say so and skip).
	$(GO) test -short -json $(TESTFLAGS) ./... | $(GO) run ./hack/testsummary

.PHONY: bench
bench: tools-test system-deps ## Run benchmarks (placement, DNS, bootstrap and replacement timings, the hub with 10-50 rings).
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./...
	$(MAKE) bench-dns

# The hub with SCALE_RINGS EtcdClusters (one member each, the first three
# with three), on the local environment: a markdown table per ring count,
# also written to SCALE_OUT. `make bench` runs it too, with the default
# 10,25,50.
SCALE_RINGS ?= 10,25,50
SCALE_OUT ?= $(CURDIR)/hub-scale.md
.PHONY: bench-scale
bench-scale: tools-test system-deps ## Hub scale benchmark: SCALE_RINGS EtcdClusters (default 10,25,50), table in SCALE_OUT.
	ETCDFED_SCALE_RINGS=$(SCALE_RINGS) ETCDFED_SCALE_OUT=$(SCALE_OUT) $(GO) test -run '^$$' -bench 'BenchmarkHubScale$$' -benchtime 1x -timeout 60m -v ./test/multicluster

# The same benchmark before the hub's scale fixes (BEFORE, default a4959c0,
# in a temporary git worktree) and on this tree, one after the other on this
# machine, merged into one table in COMPARE_OUT (see
# hack/bench-scale-compare.sh; AFTER_EXTRA_RINGS=100 adds ring counts for
# this tree only).
BEFORE ?= a4959c0
COMPARE_OUT ?= $(CURDIR)/out/bench-scale-compare.md
.PHONY: bench-scale-compare
bench-scale-compare: tools system-deps ## Hub scale benchmark of BEFORE (default a4959c0) and of this tree in one run, one before/after table in COMPARE_OUT.
	BEFORE=$(BEFORE) SCALE_RINGS=$(SCALE_RINGS) AFTER_EXTRA_RINGS=$(AFTER_EXTRA_RINGS) OUT=$(COMPARE_OUT) hack/bench-scale-compare.sh

.PHONY: bench-dns
bench-dns: system-deps ## dnsperf against the embedded DNS server and BIND9 serving the same zone.
	hack/bench-dns.sh
