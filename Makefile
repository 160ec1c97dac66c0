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
# given (TEST_P at a time), so the multi-cluster tests (about 11 minutes)
# start while the rest are still being built and run beside them, instead
# of last.
TEST_PKGS ?= ./test/multicluster ./...
# Test binaries run at once (go test -p). At two, the two cores were
# idle for about a fifth of `make test` (vmstat every 10 s,
# docs/measurements/first-run.md), mostly in its second half, where the
# packages wait on timers and processes; a third binary fills that.
TEST_P ?= 3
BENCHTIME ?= 1s

export ETCDFED_BIN_DIR := $(BIN)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
# BUILD_STATIC=1 builds them as the images' are (CGO_ENABLED=0,
# -trimpath): `make demo NODES=real` does, so that the images' build that
# follows finds every package compiled (with the host's default flags a
# new machine compiled etcdfed's dependency graph twice).
BUILD_STATIC ?=
build: ## Build hub, spoke, the etcdfed-init helper and the etcdfed CLI into bin/ (BUILD_STATIC=1: as the images' binaries, static and -trimpath).
	$(if $(BUILD_STATIC),CGO_ENABLED=0 )$(GO) build $(if $(BUILD_STATIC),-trimpath )-ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...
	@# go build leaves a binary whose inputs did not change as it was; the
	@# touch says it stands for the tree as it is now (testenv.BuildOurs
	@# takes it for the tests only when no source is newer).
	touch $(addprefix $(BIN)/,hub spoke etcdfed etcdfed-init)

# IMAGES picks images by name (default: hub, spoke, etcdfed-init, etcd-3.7,
# etcd-3.6, etcd-3.5; "all" adds hack/kind's all-in-one etcdfed image;
# "demo" is hub, spoke, etcdfed-init and the default release's etcd).
IMAGES ?=
.PHONY: images
images: ## Build the OCI image tarballs into out/images without Docker (hub, spoke, etcdfed-init, etcd 3.7, 3.6 and 3.5; IMAGES to pick). Load them with: go run ./hack/images load --address SOCKET.
	$(GO) run ./hack/images build --version '$(VERSION)' --out out/images $(IMAGES)

.PHONY: tools
tools: ## Build every pinned tool into bin/ (kube-apiserver, kubectl, etcd 3.6, 3.5 and 3.7, etcdctl, etcdutl, controller-gen, golangci-lint, versitygw, promtool; only what is missing).
	hack/tools.sh

# The tools each purpose runs, so that a first `make demo` builds only what
# the demo runs, and `make test` not the generators and linters.
.PHONY: tools-demo tools-test
# The demo ring and the apiservers' stores run one etcd build, the default
# release's (3.7); a demo of another release (DEMO_FLAGS='--etcd-version
# ...') builds the other releases too.
# NODES=real adds kubectl and what the nodes run (kubelet, scheduler,
# controller manager, kube-proxy, containerd, CoreDNS, pause), and nothing
# only the real-node tests use (etcd 3.6 and 3.5, etcdutl, versitygw).
tools-demo: ## Build the tools `make demo` runs (kube-apiserver, etcd 3.7, etcdctl; NODES=real: the nodes' too).
	hack/tools.sh --for $(if $(filter real,$(NODES)),realdemo,demo)
	$(if $(findstring --etcd-version,$(DEMO_FLAGS)),hack/tools.sh etcd etcd35)
tools-test: ## Build the tools the tests run (all but controller-gen and golangci-lint).
	hack/tools.sh --for test

.PHONY: system-deps
system-deps: ## Install the Debian packages tests use (bind9, bind9-utils, dnsutils, dnsperf, iptables, iproute2) when missing.
	hack/system-deps.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, the Dockerfile (from dev/images), and the spec.version rules and version matrix (docs/upgrades.md) from pkg/etcdversion.
	hack/tools.sh controller-gen
	$(BIN)/controller-gen object:headerFile="" paths=./api/...
	$(GO) run ./hack/versionpolicy
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	$(GO) generate ./config/...
	$(GO) run ./hack/images dockerfile --out Dockerfile

.PHONY: verify
verify: generate verify-deps ## Check generated files are current, production binaries free of test code, no compiled binary committed, gofmt, go vet, golangci-lint.
	@git diff --exit-code -- api config Dockerfile docs/upgrades.md || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go')); [[ -z "$$out" ]] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@out=$$(git ls-files -z | xargs -0 grep -l -m1 -P '\A\x7fELF' 2>/dev/null || true); [[ -z "$$out" ]] || { echo "compiled binaries are committed (git rm --cached them):"; echo "$$out"; exit 1; }
	$(GO) vet ./...
	hack/tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...

# hack/proddeps: no import runs up a floor (base: api, config, pkg,
# internal, dnsprovider; components: hub, spoke; cli; dev, test, hack and
# fixtures; cmd), and hub, spoke and etcdfed-init must not link testing,
# envtest, etcdfed's fixtures or the local environment.
.PHONY: verify-deps
verify-deps: ## Fail when an import runs up a floor (internal/ importing hub/, ...) or a production binary (hub, spoke, etcdfed-init) links test or dev code; prints the import chain.
	$(GO) run ./hack/proddeps

##@ Run

# DETACH=1: return once the demo EtcdCluster is Available, leaving the
# environment running until `bin/etcdfed dev down`. The demo runs the
# newest etcd etcdfed supports; another with
# DEMO_FLAGS='--clusters 3 --members 5 --etcd-version 3.6.16'.
DETACH ?=
DEMO_FLAGS ?= --clusters 3 --members 5

# The demo installs iptables when it can (root with apt-get) and runs
# without it otherwise; `etcdfed dev up` says in its first line what the
# environment could not do and what it does instead.
# NODES=real: real nodes (kubelet, containerd and runc per node; the hub and
# the spokes deployed in-cluster from config/), as root; see
# docs/local-environment.md. Their images are built here, on the host's
# network and before `dev up` starts its deadline: built inside it, a cold
# first run on a new machine was killed at the deadline. Only the images
# the ring runs (IMAGES=demo: hub, spoke, etcdfed-init and the default
# release's etcd; every release's with an --etcd-version in DEMO_FLAGS).
# `make scenarios`,
# `make failures` and `make nemesis` take NODES=real too: the tests on the
# hub topology run on real nodes (ETCDFED_NODES=real; realnode-deps first).
NODES ?=
# DISTANCE puts every local environment the tests start at a distance
# from its start (`etcdfed dev latency set`'s form: one-region,
# three-regions, or links such as zone-1:zone-2=20ms/5ms), e.g. `make
# failures DISTANCE=one-region`; a test that sets its own keeps it. Root,
# iptables and cgroup v2, as partitions.
DISTANCE ?=
export ETCDFED_DISTANCE := $(DISTANCE)
# The project's binaries build beside the tools: on a new machine the
# kube-apiserver build alone holds one of the two lanes for most of the wait.
.PHONY: demo
demo: ## Local hub + 3 member clusters, a 5-member etcd over 3 zones, formed by etcdfed (DETACH=1 to background, NODES=real for real nodes).
	$(MAKE) --no-print-directory -j2 tools-demo build $(if $(filter real,$(NODES)),BUILD_STATIC=1)
	$(if $(filter real,$(NODES)),hack/system-deps.sh realnodes)
	$(if $(filter real,$(NODES)),$(MAKE) --no-print-directory images IMAGES='$(if $(findstring --etcd-version,$(DEMO_FLAGS)),,demo)')
	hack/system-deps.sh demo
	$(BIN)/etcdfed dev up $(DEMO_FLAGS) $(if $(NODES),--nodes $(NODES)) $(if $(filter real,$(NODES)),--images out/images) $(if $(DETACH),--detach)

.PHONY: realnode-deps
realnode-deps: ## What real nodes run: kubelet, scheduler, controller manager, kube-proxy, containerd, CoreDNS besides the test tools (hack/tools.sh --for realnodes), runc and the CNI plugins (Debian); the image builder's Go modules downloaded on the host's network.
	hack/tools.sh --for realnodes
	hack/system-deps.sh realnodes
	@# The real-node environment builds its images (dev/images) inside its
	@# network namespace, where the Go module proxy cannot be reached: the
	@# modules of every etcd release it builds (etcdctl and etcdutl too, which
	@# hack/tools.sh does not build) are downloaded here first. On a new
	@# machine the image build failed without this ("dial udp ...: network
	@# is unreachable").
	@echo ">> Go modules of the image builder's etcd releases (hack/tools/etcd, etcd35, etcd37)"
	@for m in hack/tools/etcd hack/tools/etcd35 hack/tools/etcd37; do (cd $$m && $(GO) mod download) || exit 1; done

##@ Test

# The targets that run tests after `build` tell them that bin/ holds hub,
# spoke, etcdfed and etcdfed-init built from this tree just now, so that a
# test takes those rather than linking them again (testenv.BuildOurs; a
# binary older than a source file is built anyway).
test drill scenarios failures nemesis tenancy rotation test-realnodes test-kind: export ETCDFED_TEST_BUILT_BIN := $(BIN)

# hack/leftovers first: processes an earlier run left behind are reported,
# and stopped where its records prove a test binary that is gone started them.
.PHONY: test
test: tools-test system-deps build ## Run every test: unit, integration (real apiservers) and multicluster (real etcd, real DNS).
	$(GO) run ./hack/leftovers
	$(GO) test -json -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(TEST_PKGS) | $(GO) run ./hack/testsummary

.PHONY: drill
drill: tools-test system-deps build ## Drills too long for `make test`: the hub killed at every step of an add and a move (make before break), DRILL_RUNS times (default 10) under CPU load.
	ETCDFED_DRILL=1 ETCDFED_DRILL_RUNS=$(or $(DRILL_RUNS),10) ETCDFED_DRILL_CPU_BURN=2 $(GO) test -count=1 -timeout 120m -v -run 'TestHubRestartAtEveryStep' ./test/multicluster

# SCENARIOS picks scenarios by test name (a go test -run pattern).
SCENARIOS ?= ^TestScenario
.PHONY: scenarios
scenarios: tools-test system-deps build $(if $(filter real,$(NODES)),realnode-deps) ## Every scenario too long for `make test` (failures, upgrades, defragmentation, certificates, backups, recovery), each under a recorded workload (SCENARIOS to pick).
	ETCDFED_SCENARIOS=1 ETCDFED_NODES='$(NODES)' $(GO) test -count=1 -timeout 120m -v -run '$(SCENARIOS)' ./test/multicluster

# The failure scenarios (issue 13's list), `etcdfed drill zone-failure` in
# its three modes, and one run of the hub-kill drill: about 25 minutes,
# run by .ci/run after `make test`.
# With NODES=real the scenario on two member clusters of two zones runs
# in a test binary of its own: a binary holds one real-node environment
# (they share its network namespace), and the others share the ring's.
FAILURE_SCENARIOS := ^TestScenario(VolumeLost|CrashLoop|ZoneDrained|StartGivenUp|LeaderZoneKilledAndReturned|HubPartitioned|HubDownZoneKilled|ZoneOfMultiZoneClusterKilled|HubWithMinority|DrillZoneFailure)$$
.PHONY: failures
failures: tools-test system-deps build ## The failure scenarios (lost volume, crash loop, a zone drained, a volume lost in a drained zone (the start given up), the leader's zone killed and returned, hub partitioned, hub down during a zone kill, a zone of a multi-zone cluster, the hub with the minority of a partition), the zone-failure drill in its three modes and one hub-kill drill run.
ifeq ($(NODES),real)
	$(MAKE) scenarios SCENARIOS='$(subst |ZoneOfMultiZoneClusterKilled,,$(FAILURE_SCENARIOS))'
	$(MAKE) scenarios SCENARIOS='^TestScenarioZoneOfMultiZoneClusterKilled$$$$'
else
	$(MAKE) scenarios SCENARIOS='$(FAILURE_SCENARIOS)'
endif
	$(MAKE) drill DRILL_RUNS=1

# promtool is built for the targets that run the alerts' unit tests only
# (hack/tools.sh --for test builds it too).
.PHONY: test-alerts
test-alerts: ## The shipped alerts' unit tests (promtool test rules) and the dashboard's checks (config/monitoring).
	hack/tools.sh promtool
	$(GO) test -count=1 ./config/monitoring/

.PHONY: test-images
test-images: ## Build every image, load it into a private containerd (Debian's, installed when missing) and run each one's binaries with ctr run.
	hack/system-deps.sh images
	ETCDFED_IMAGES_TEST=1 $(GO) test -count=1 -timeout 30m -v -run '^TestImagesRunInContainerd$$' ./dev/images

# Random fault schedules over a 5-member ring (issue 24): NEMESIS_SEED
# (default: from the clock, printed with the line that replays it),
# NEMESIS_SCHEDULES (default 20), NEMESIS_PROFILE (full, ci: fewer and
# shorter faults, or wan: full with distance between units among the
# faults), NEMESIS_ONLY (schedule indexes to replay, e.g. 3,7), NODES=real
# (as root: the same ring on real nodes, as `make scenarios NODES=real`).
NEMESIS_SCHEDULES ?= 20
.PHONY: nemesis
nemesis: tools-test system-deps build $(if $(filter real,$(NODES)),realnode-deps) ## Random fault schedules from a seed (partitions of any shape, one-way cuts, cluster and hub kills) over a 5-member ring, each under the recorded workload and a leader watch; NEMESIS_SEED replays a run.
	ETCDFED_NEMESIS=1 ETCDFED_NODES='$(NODES)' NEMESIS_SEED='$(NEMESIS_SEED)' NEMESIS_SCHEDULES='$(NEMESIS_SCHEDULES)' NEMESIS_PROFILE='$(NEMESIS_PROFILE)' NEMESIS_ONLY='$(NEMESIS_ONLY)' \
		$(GO) test -count=1 -timeout 240m -v -run '^TestNemesis$$' ./test/multicluster

# Tenancy (issue 26): two same-named rings side by side and a domain
# refused (also in `make test`), and a ring of the old names adopted by
# this hub and spokes without a restart (a scenario: builds 1b133dd).
# Trust (issue 37): a tenant tries every path of the threat model against
# another tenant's ring, with the hub restarted under a shared hub's
# policy (a scenario: 77 s on the shared machine, 2026-11-28).
TENANCY_SCENARIOS := ^(TestTenantsSideBySide|TestScenarioLegacyNamesAdopted|TestScenarioTenantCannotReachAnotherTenant)$$
.PHONY: tenancy
tenancy: tools-test system-deps build ## Tenancy on the local environment: same-named rings side by side, a domain refused, a ring of the old object names upgraded in place, a tenant refused every path to another's ring.
	$(MAKE) scenarios SCENARIOS='$(TENANCY_SCENARIOS)'

# The scenarios `make failures` does not run, a slice per run: .ci/run
# runs one after `make failures`, so that every scenario runs within a few
# CI runs (hack/rotation packs them into slices of at most ROTATION_BUDGET,
# estimated, and picks slice ROTATION_RUN mod their number; ROTATION_RUN
# defaults to a number read from HEAD's commit hash, and .ci/run passes
# one independent of its real-node choice). It prints which run now and
# which come next.
# With ROTATION_LEDGER (.ci/run: bin/ci-ledger, kept with bin/'s cache)
# the slice whose scenarios passed longest ago runs, and a slice that
# passed is recorded there.
ROTATION_BUDGET ?= 10m
ROTATION_RUN ?=
ROTATION_LEDGER ?=
.PHONY: rotation
rotation: tools-test system-deps build ## One slice of the scenarios outside `make failures`, rotating by ROTATION_RUN (default: from the commit hash) or, with ROTATION_LEDGER, the slice that passed longest ago; prints which run now and which next.
	pattern=$$($(GO) run ./hack/rotation -exclude '$(FAILURE_SCENARIOS)' -budget $(ROTATION_BUDGET) -run '$(ROTATION_RUN)' -ledger '$(ROTATION_LEDGER)'); \
	$(MAKE) scenarios SCENARIOS="$$pattern" && \
	if [ -n '$(ROTATION_LEDGER)' ]; then $(GO) run ./hack/rotation -ledger '$(ROTATION_LEDGER)' -passed "$$pattern"; fi

# REALNODES picks the real-node tests by name (a go test -run pattern).
REALNODES ?= ^TestRealNodes
.PHONY: test-realnodes
test-realnodes: realnode-deps build ## The TestRealNodes* scenarios on real nodes (root): kubelet, containerd and runc per node, the hub and the spokes in-cluster from config/, each under a recorded workload (REALNODES to pick).
	ETCDFED_REALNODES=1 $(GO) test -count=1 -timeout 100m -v -run '$(REALNODES)' ./test/multicluster

# kind: the node image built here (no registry), then up.sh, the zone
# failure under the recorded workload and down.sh (hack/kind, docs/kind.md).
.PHONY: kind-deps
kind-deps: ## What hack/kind needs here: Docker's engine, debootstrap, libseccomp-dev (Debian), kind, kubeadm and kubectl (hack/tools.sh), a running dockerd.
	hack/system-deps.sh kind
	hack/tools.sh kind kubeadm kubectl
	hack/kind/dockerd.sh

.PHONY: kind-image
kind-image: kind-deps ## Build the kind node image (Kubernetes as hack/tools.sh pins it) without any registry; cached (hack/kind/node-image.sh).
	hack/kind/node-image.sh

# go test's timeout of make test-kind (.ci/run's kind turn passes the time
# it has left).
KIND_TIMEOUT ?= 70m
# How TestKindZoneFailure fails the zone: stop, pause or cut (a network cut;
# hack/kind/fail-zone.sh's modes).
KIND_FAIL ?= stop
# KIND_TWO_ZONES=N: member cluster N of make test-kind spans two zones
# (hack/kind/up.sh --two-zones N).
KIND_TWO_ZONES ?=
# KIND_WORKERS=N: N worker nodes per member cluster besides the control
# plane (hack/kind/up.sh --workers N); the members run on the workers.
KIND_WORKERS ?=
.PHONY: test-kind
test-kind: kind-image build ## On kind (root, Docker): hack/kind/up.sh from nothing, TestKindZoneFailure under the recorded workload, hack/kind/down.sh leaving nothing.
	PATH="$(BIN):$$PATH" ETCDFED_KIND=1 ETCDFED_KIND_FAIL=$(KIND_FAIL) ETCDFED_KIND_TWO_ZONES=$(KIND_TWO_ZONES) ETCDFED_KIND_WORKERS=$(KIND_WORKERS) $(GO) test -count=1 -timeout $(KIND_TIMEOUT) -v -run '^TestKind' ./test/multicluster

.PHONY: test-unit
test-unit: ## Run unit tests only (-short: tests needing processes say so and skip).
	$(GO) test -short -json $(TESTFLAGS) ./... | $(GO) run ./hack/testsummary

.PHONY: bench
bench: tools-test system-deps ## Run benchmarks (placement, DNS, bootstrap and replacement timings, the hub with 10-50 rings).
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./...
	$(MAKE) bench-dns

# The zone-failure benchmark alone (make bench runs it with the rest):
# ZONEFAIL_RUNS kills of the leader's two-member zone, with ZONEFAIL_DISTANCE
# (a round trip such as 20ms) between the member clusters when given.
ZONEFAIL_RUNS ?= 3
ZONEFAIL_DISTANCE ?=
.PHONY: bench-zone-failure
bench-zone-failure: tools-test system-deps ## Zone-failure benchmark alone: ZONEFAIL_RUNS kills of the leader's zone (default 3), ZONEFAIL_DISTANCE between member clusters (such as 20ms).
	ETCDFED_ZONEFAIL_DISTANCE=$(ZONEFAIL_DISTANCE) $(GO) test -run '^$$' -bench 'BenchmarkZoneFailure$$' -benchtime $(ZONEFAIL_RUNS)x -timeout 60m -v ./test/multicluster

# The hub with SCALE_RINGS EtcdClusters (one member each, the first three
# with three), on the local environment: a markdown table per ring count,
# also written to SCALE_OUT. `make bench` runs it too, with the default
# 10,25,50.
SCALE_RINGS ?= 10,25,50
SCALE_OUT ?= $(CURDIR)/hub-scale.md
.PHONY: bench-scale
bench-scale: tools-test system-deps ## Hub scale benchmark: SCALE_RINGS EtcdClusters (default 10,25,50), table in SCALE_OUT.
	ETCDFED_SCALE_RINGS=$(SCALE_RINGS) ETCDFED_SCALE_OUT=$(SCALE_OUT) $(GO) test -run '^$$' -bench 'BenchmarkHubScale$$' -benchtime 1x -timeout 60m -v ./test/multicluster

# The hub over simulated member clusters (dev/simcluster): FLEET_RINGS rings
# of 3 and 5 members over FLEET_CLUSTERS clusters (at most 31, addr.MaxMemberClusters), report in
# FLEET_OUT; FLEET_LIMIT=n runs the hub with --max-fleet-disruptions=n (and
# fails the run when more rings than n record a limited operation at once).
# FLEET_PHASES, a comma list of spec, restart, roll, carotate and loss
# (default spec,restart,loss), picks the phases after the rest window: roll
# is a version roll of every ring (3.6.15 to 3.6.16), carotate a CA
# rotation of every ring (the rotate-ca annotation). FLEET_REST_ONLY=1
# stops after the rest window. FLEET_PPROF=DIR runs the hub with
# --pprof-bind-address and writes a 30 s CPU profile of its bootstrap
# (from a minute after the rings' creation) to DIR. Run it under the
# machine's heavy lock.
FLEET_RINGS ?= 100
FLEET_CLUSTERS ?= 10
FLEET_LIMIT ?=
FLEET_PHASES ?=
FLEET_OUT ?= $(CURDIR)/out/bench-fleet.md
# FLEET_AVAILABLE_TIMEOUT bounds the bootstrap (empty: 30m); FLEET_GO_TIMEOUT
# the whole run. Raise both past 300 rings on a small machine.
FLEET_AVAILABLE_TIMEOUT ?=
FLEET_GO_TIMEOUT ?= 120m
.PHONY: bench-fleet
bench-fleet: tools-test system-deps ## Fleet benchmark on simulated member clusters: FLEET_RINGS rings (default 100) over FLEET_CLUSTERS (default 10); Available, then FLEET_PHASES of spec,restart,roll,carotate,loss (default spec,restart,loss); report in FLEET_OUT.
	@mkdir -p $(dir $(FLEET_OUT))
	FLEET_RINGS=$(FLEET_RINGS) FLEET_CLUSTERS=$(FLEET_CLUSTERS) FLEET_LIMIT=$(FLEET_LIMIT) FLEET_PHASES=$(FLEET_PHASES) FLEET_OUT=$(FLEET_OUT) FLEET_PPROF=$(FLEET_PPROF) FLEET_AVAILABLE_TIMEOUT=$(FLEET_AVAILABLE_TIMEOUT) $(GO) test -run '^$$' -bench 'BenchmarkFleet$$' -benchtime 1x -timeout $(FLEET_GO_TIMEOUT) -v ./test/multicluster

# The same benchmark before the hub's scale fixes (BEFORE, default a4959c0,
# in a temporary git worktree) and on this tree, one after the other on this
# machine, merged into one table in COMPARE_OUT (see
# hack/bench-scale-compare.sh; AFTER_EXTRA_RINGS=100 adds ring counts for
# this tree only).
BEFORE ?= a4959c0
COMPARE_OUT ?= $(CURDIR)/out/bench-scale-compare.md
.PHONY: bench-scale-compare
bench-scale-compare: tools-test system-deps ## Hub scale benchmark of BEFORE (default a4959c0) and of this tree in one run, one before/after table in COMPARE_OUT.
	BEFORE=$(BEFORE) SCALE_RINGS=$(SCALE_RINGS) AFTER_EXTRA_RINGS=$(AFTER_EXTRA_RINGS) OUT=$(COMPARE_OUT) hack/bench-scale-compare.sh

# A 5-member ring 2/2/1 over three zones at WAN_DISTANCES ms between zones
# (the local environment's delaying proxy): write latency per client zone
# for etcdfed (Auto timing, leader placement), etcdfed with etcd's default
# timing and a bare etcd of the same shape through the same proxy; the
# leader's zone lost at WAN_FAILOVER ms (etcdfed Auto against bare etcd,
# and bare etcd at the WAN_SWEEP timings); WAN_SOAK=1 adds a stability run
# of WAN_SOAK_FOR at 20 ms +- 10 ms under CPU load (etcdfed Auto and bare
# etcds at the WAN_SOAK_BARE timings), after WAN_SOAK_ADAPT of the load alone
# for the Auto ring's timing to follow it. WAN_FLOOR=Disk gives the Auto ring
# spec.etcd.timingFloor Disk (its failover then waits for the floor, ten
# minutes or more). Markdown in WAN_OUT.
# Starts the local environment: run it under the machine's heavy lock.
WAN_DISTANCES ?= 0,10,20,40
WAN_WRITES ?= 200
WAN_FAILOVER ?= 20
WAN_FAILOVER_RUNS ?= 2
WAN_SWEEP ?= 100/1000,50/500,30/300
WAN_SWEEP_RUNS ?= 2
WAN_SOAK ?=
WAN_SOAK_FOR ?= 10m
WAN_SOAK_ADAPT ?= 0s
WAN_SOAK_BARE ?= 30/300,40/400,50/500,100/1000
WAN_SOAK_LOGS ?=
WAN_FLOOR ?=
WAN_OUT ?= $(CURDIR)/out/bench-wan.md
.PHONY: bench-wan
bench-wan: tools-test system-deps ## WAN benchmark: write latency per client zone at WAN_DISTANCES ms (etcdfed Auto, etcdfed default, bare etcd), the leader's zone lost, WAN_SOAK=1 a 10-min stability run; table in WAN_OUT.
	ETCDFED_WAN=1 ETCDFED_WAN_DISTANCES=$(WAN_DISTANCES) ETCDFED_WAN_WRITES=$(WAN_WRITES) ETCDFED_WAN_FAILOVER=$(WAN_FAILOVER) ETCDFED_WAN_FAILOVER_RUNS=$(WAN_FAILOVER_RUNS) \
	ETCDFED_WAN_SWEEP=$(WAN_SWEEP) ETCDFED_WAN_SWEEP_RUNS=$(WAN_SWEEP_RUNS) ETCDFED_WAN_SOAK=$(WAN_SOAK) ETCDFED_WAN_SOAK_FOR=$(WAN_SOAK_FOR) ETCDFED_WAN_SOAK_ADAPT=$(WAN_SOAK_ADAPT) ETCDFED_WAN_SOAK_BARE=$(WAN_SOAK_BARE) ETCDFED_WAN_SOAK_LOGS=$(WAN_SOAK_LOGS) ETCDFED_WAN_FLOOR=$(WAN_FLOOR) \
	ETCDFED_WAN_OUT=$(WAN_OUT) $(GO) test -run '^$$' -bench 'BenchmarkWAN$$' -benchtime 1x -timeout 90m -v ./test/multicluster

.PHONY: bench-dns
bench-dns: system-deps ## dnsperf against the embedded DNS server and BIND9 serving the same zone.
	hack/bench-dns.sh
