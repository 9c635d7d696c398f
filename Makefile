# Corral. `make run` builds and starts the server; `make test` is everything
# CI checks. Both install what they need themselves.

GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export PATH := $(dir $(GO)):$(PATH)
# The Go that builds and tests Corral. go.mod asks for 1.26 (the language);
# the toolchain is the newest patch release because govulncheck (in `make
# lint`) finds reachable standard-library vulnerabilities in older ones. The
# go command fetches it once from the module proxy into the module cache.
export GOTOOLCHAIN := go1.27.3
export CGO_ENABLED ?= 0

BIN      := bin/corral
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X corral/internal/app.version=$(VERSION)
FUZZTIME ?= 30000x
FUZZ_TARGETS := FuzzName FuzzPath FuzzContent FuzzText FuzzEmail FuzzDisplayName FuzzPassword FuzzModelName FuzzID FuzzHost FuzzRefName FuzzBranch
# The agent CLIs (Codex, Claude Code, OpenCode) at the versions pinned in
# internal/driver/tools/, installed by `make tools`; sessions see it
# read-only at /opt/corral/tools. The driver tests find it through
# CORRAL_TOOLS_DIR.
TOOLS_DIR ?= $(CURDIR)/build/tools
export CORRAL_TOOLS_DIR := $(TOOLS_DIR)

.PHONY: all build run test test-short deps tools e2fsprogs iproute2 postgres cc vet fmt-check lint staticcheck vulncheck unit unit-short race fuzz bench clean web web-deps web-test browser openapi

all: build

deps:
	@$(GO) version >/dev/null 2>&1 || { echo "Go is required: install it at /usr/local/go or put it on PATH" >&2; exit 1; }
	$(GO) mod download

# The binary embeds the web app (the "ui" build tag); plain `go build`
# gives a binary with a stub page instead, so Go alone needs no Node.
build: deps web
	@echo "building $(BIN) (Go; nothing is relinked when nothing changed)"
	@$(GO) build -trimpath -tags ui -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/corral

run: build e2fsprogs tools
	@[ -n "$$CORRAL_MODEL_BASE_URL" ] || echo "note: no model provider is set, so agents will not answer: run it as CORRAL_MODEL_BASE_URL=https://api.openai.com/v1 CORRAL_MODEL_API_KEY=sk-... CORRAL_MODEL=gpt-4.1-mini make run (or http://127.0.0.1:11434/v1 for Ollama)"
	./$(BIN) serve

test: deps tools e2fsprogs iproute2 postgres fmt-check vet lint fuzz unit race web-test

# The inner loop: formatting, vet and the Go tests with the slowest ones
# skipped (see unit-short); no race detector, no web app, nothing
# installed. make test and CI run everything.
test-short: fmt-check vet unit-short

# The web app: Node 20.19+ (Vite 8) and the npm packages of web/, installed
# from the lock file when it changed.
web-deps:
	@command -v node >/dev/null 2>&1 || { echo "Node.js 20.19 or later is required for the web app (https://nodejs.org or apt-get install nodejs from NodeSource)" >&2; exit 1; }
	@if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then \
		echo "installing the web app's npm packages into web/node_modules (about 140 MB, from web/package-lock.json)"; \
		cd web && npm ci --no-audit --no-fund; fi

# The build reruns only when what it reads changed (not the tests): a
# `make run` with nothing changed neither rebuilds the app nor relinks.
WEB_SRC  := $(shell find web/src web/index.html web/package.json web/package-lock.json web/tsconfig.json web/vite.config.ts -type f ! -name '*.test.*' 2>/dev/null)
WEB_DIST := internal/webui/dist/index.html

web: web-deps $(WEB_DIST)

$(WEB_DIST): $(WEB_SRC) | web-deps
	@echo "building the web app into internal/webui/dist (tsc, then vite)"
	cd web && npm run build

# The API's contract, regenerated from the code: internal/api/openapi.json
# from the route table, the views and internal/api/contract*.go, then the
# web app's types (web/src/api.gen.ts) from that file. Run it after
# changing any of them; TestOpenAPIUpToDate (make unit) and `npm run
# check:api` (make web-test) fail until their outputs are committed.
openapi: deps web-deps
	$(GO) generate ./internal/api
	cd web && npm run gen:api

# Debian's chromium for the browser tests, installed when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing and cannot be installed here (needs root and apt-get)" >&2; exit 1; fi; }

# Component tests (Vitest), then the browser tests: a real corral serve
# with the app embedded, a scripted fake model and a real git server,
# driven by chromium.
web-test: build browser tools
	cd web && npm run check:api
	cd web && npm test
	$(GO) build -o bin/fakemodel ./internal/modeltest/fakemodel
	$(GO) build -o bin/gitserver ./internal/gittest/gitserver
	cd web && CORRAL_BIN=$(CURDIR)/$(BIN) FAKEMODEL_BIN=$(CURDIR)/bin/fakemodel GITSERVER_BIN=$(CURDIR)/bin/gitserver npm run e2e

# The API walkthrough test (docs/api.md) drives curl and jq; git repositories (clone,
# commit, push) run Debian's git. Installed when missing (as root, from
# Debian's packages); without curl and jq that one test skips, without git
# clones fail saying so and the git tests skip. Then the agent CLIs into
# TOOLS_DIR (npm, idempotent: nothing to do when the pins are unchanged).
tools:
	@missing=""; for t in curl jq git; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing$$missing"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else echo "note:$$missing missing and cannot be installed here: the API walkthrough test will skip"; fi; \
	fi
	@TOOLS_DIR='$(TOOLS_DIR)' sh scripts/install-tools.sh

# Every run's staged tree is a filesystem of its own (its disk limits),
# made with mke2fs: installed when missing (e2fsprogs, as root, from
# Debian's packages). Without it runs are refused, saying so.
e2fsprogs:
	@command -v mke2fs >/dev/null 2>&1 || [ -x /usr/sbin/mke2fs ] || [ -x /sbin/mke2fs ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing e2fsprogs"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null; \
		else echo "note: mke2fs missing and cannot be installed here (needs root and apt-get): runs will be refused"; fi; }

# The split roles' test across network namespaces (cmd/corral) makes them
# with ip and throttles a link with tc: iproute2, installed when missing
# (as root, from Debian's packages). Without it that test skips, or fails
# where CORRAL_REQUIRE_KERNEL=1.
iproute2:
	@command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || [ -x /bin/ip ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing iproute2"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; \
		else echo "note: ip missing and cannot be installed here (needs root and apt-get): the network namespaces test will skip"; fi; }

# The tests that need a real PostgreSQL start their own throwaway server
# (internal/pgtest) from initdb and postgres, on PATH or under
# /usr/lib/postgresql/*/bin: Debian's postgresql, installed when missing
# (as root). The package may start a system cluster of its own; nothing
# uses it. Without PostgreSQL those tests skip, or fail where
# CORRAL_REQUIRE_POSTGRES=1.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing postgresql"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else echo "PostgreSQL is missing and cannot be installed here (needs root and apt-get): install Debian's postgresql" >&2; exit 1; fi; }

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Static analysis: staticcheck (its default checks; a false positive is
# silenced where it stands with //lint:ignore and the reason) and
# govulncheck (the known vulnerabilities of the Go and the modules Corral
# is built with, reported where Corral's code reaches them). Both are
# installed at pinned versions into build/lint, once for each Go version
# (a tool built by an older Go cannot read a newer one's standard
# library).
lint: staticcheck vulncheck

STATICCHECK_VERSION := v0.8.2
GOVULNCHECK_VERSION := v1.9.0
LINT_DIR := $(CURDIR)/build/lint
LINT_BIN = $(LINT_DIR)/$(shell GOTOOLCHAIN=$(GOTOOLCHAIN) $(GO) env GOVERSION)

staticcheck: deps
	@[ -x $(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION)/staticcheck ] || { \
		echo "installing staticcheck $(STATICCHECK_VERSION) into build/lint"; \
		GOBIN=$(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }
	$(LINT_BIN)/staticcheck-$(STATICCHECK_VERSION)/staticcheck ./...

# govulncheck fetches its database from vuln.go.dev, which these machines
# cannot reach; it reads a copy made here instead: the OSV entries that
# the golang.org/x/vulndb module carries (its newest version on the Go
# module proxy, or VULNDB_VERSION), indexed by that module's own
# cmd/indexdb into build/lint/vulndb-VERSION. The check is as fresh as
# that module: the version and its date are printed.
VULNDB_VERSION ?= latest
INDEXDB_VERSION := v0.0.0-20261105234957-e22db6528018
vulncheck: deps
	@[ -x $(LINT_BIN)/govulncheck-$(GOVULNCHECK_VERSION)/govulncheck ] || { \
		echo "installing govulncheck $(GOVULNCHECK_VERSION) into build/lint"; \
		GOBIN=$(LINT_BIN)/govulncheck-$(GOVULNCHECK_VERSION) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION); }
	@[ -x $(LINT_BIN)/indexdb-$(INDEXDB_VERSION)/indexdb ] || { \
		echo "installing the vulnerability database indexer (golang.org/x/vulndb/cmd/indexdb) into build/lint"; \
		GOBIN=$(LINT_BIN)/indexdb-$(INDEXDB_VERSION) $(GO) install golang.org/x/vulndb/cmd/indexdb@$(INDEXDB_VERSION); }
	@set -e; \
	info=$$($(GO) list -m -f '{{.Version}} {{.Time}}' golang.org/x/vulndb@$(VULNDB_VERSION)); \
	version=$${info%% *}; db=$(LINT_DIR)/vulndb-$$version; \
	if [ ! -f $$db/index/modules.json ]; then \
		src=$$($(GO) mod download -json golang.org/x/vulndb@$$version | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'); \
		[ -d "$$src/data/osv" ] || { echo "golang.org/x/vulndb@$$version has no data/osv" >&2; exit 1; }; \
		rm -rf $$db.tmp; $(LINT_BIN)/indexdb-$(INDEXDB_VERSION)/indexdb -vulns $$src/data/osv -out $$db.tmp; mv $$db.tmp $$db; \
	fi; \
	echo "govulncheck against golang.org/x/vulndb $$info ($$(find $$db/ID -name '*.json' | wc -l) entries), with $$($(GO) env GOVERSION)"; \
	$(LINT_BIN)/govulncheck-$(GOVULNCHECK_VERSION)/govulncheck -db file://$$db ./...

# Go's default per-package timeout is 10 minutes; internal/api, the
# heaviest package, takes about 200 s alone on a quiet 2-core machine and
# needed about 500 s under CI's load: 30 minutes leaves it margin, and a
# hung test still ends well inside CI's limit.
UNIT_TIMEOUT ?= 30m
# The store's suite runs a second time on PostgreSQL (CORRAL_STORE_TEST):
# the same tests, unchanged, are the conformance suite both engines pass;
# and so does the API's, every route and run through a real server.
unit:
	$(GO) test -count=1 -timeout $(UNIT_TIMEOUT) ./...
	CORRAL_STORE_TEST=postgres $(GO) test -count=1 -timeout $(UNIT_TIMEOUT) ./internal/store ./internal/api

# The race detector over the packages whose own code runs goroutines and
# locks: the gateway and the model API, the relay and its RPC, the fleet,
# the store, the supervisor, the runner, the services, the node, retrieval,
# git, the tests' PostgreSQL, runs' events between controls. It needs cgo, and so a C compiler (make cc).
# The packages that mostly drive real sandboxes end to end (internal/api,
# internal/workspace, cmd/corral) run in `unit` only: under the detector
# they take five to ten times as long, past what CI allows. These take
# about 4 minutes here.
RACE_PKGS := ./internal/app ./internal/gateway ./internal/modelapi ./internal/relay/... ./internal/fleet \
	./internal/netguard ./internal/keylock ./internal/trace ./internal/supervisor ./internal/store/... \
	./internal/nodeagent ./internal/egress ./internal/proxy ./internal/egresstest ./internal/archive ./internal/protocol ./internal/runner \
	./internal/service ./internal/retrieval ./internal/node ./internal/secrets/... ./internal/access \
	./internal/sanitize ./internal/gitrepo ./internal/pgtest ./internal/auth/... ./internal/fanout ./internal/runfeed
race: cc
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) $(RACE_PKGS)
	CORRAL_STORE_TEST=postgres CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) ./internal/store

# A C compiler for the race detector's cgo: gcc, installed when missing
# (as root, from Debian's packages).
cc:
	@command -v gcc >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing gcc (the race detector needs cgo)"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null; \
		else echo "gcc is missing and cannot be installed here (needs root and apt-get): make race needs it" >&2; exit 1; fi; }

# The same, but the slowest tests skip under -short (the sandbox's escape
# suites, the agent CLIs' longer walks, the split roles across network
# namespaces, the flood, the terminal's backpressure, the 100,000-file
# import, the workspace's fault matrix and crash loop). make test-short
# runs it; make test and CI run everything.
unit-short:
	$(GO) test -short -timeout $(UNIT_TIMEOUT) ./...

# A short fuzzing pass over every input validator; the seed corpora in
# testdata/ already run as part of `unit`. Longer: make fuzz FUZZTIME=5m.
# The default is a count of inputs, not a time: Go 1.26's coordinator
# can fail a time-bounded run with "context deadline exceeded" at its end
# on a loaded machine, having found nothing (go.dev/issue/75804, fixed in
# Go 1.27); a count has no deadline to race.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t ($(FUZZTIME))"; \
		$(GO) test ./internal/sanitize/ -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) >/tmp/corral-fuzz.log 2>&1 || { cat /tmp/corral-fuzz.log; exit 1; }; \
	done

# The sandbox benchmark compares against bubblewrap, installed here only.
bench: deps postgres
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
		else echo "note: bubblewrap missing: the sandbox benchmark reports the exec ratio only"; fi; }
	$(GO) test -run '^$$' -bench '^Benchmark(ListAgents|Clone|Import|StartTrue|ExecWarm|IdleSession)$$' -benchtime 40x -count 3 ./internal/api/ ./internal/sandbox/
	$(GO) test -run '^$$' -bench DelegationTree -benchtime 3x -count 3 ./internal/api/
	$(GO) test -run '^$$' -bench TraceAppend -benchtime 1000x ./internal/store/
	$(GO) test -run '^$$' -bench AuditWrites -benchtime 1000x -count 3 ./internal/store/
	$(GO) test -run '^$$' -bench UsageQuery -benchtime 20x -count 3 ./internal/store/
	$(GO) test -run '^$$' -bench BenchmarkCopy -benchtime 3x ./internal/store/
	$(GO) test -run '^$$' -bench 'Forwarded|StoreReadsSpread' -benchtime 10x -count 3 ./internal/app/
	CORRAL_STORE_TEST=postgres $(GO) test -run '^$$' -bench Fence -benchtime 2000x -count 3 ./internal/store/
	$(GO) test -run '^$$' -bench GatewayOverhead -benchtime 2000x ./internal/gateway/
	$(GO) test -run '^$$' -bench MetricsAPI -benchtime 20000x -count 3 ./internal/api/
	$(GO) test -run '^$$' -bench MetricsGateway -benchtime 5000x -count 3 ./internal/modelapi/
	$(GO) test -run '^$$' -bench GatewayTracing -benchtime 4000x -count 3 ./internal/gateway/
	$(GO) test -run '^$$' -bench ChatSpan -benchtime 50000x -count 3 ./internal/telemetry/
	$(GO) test -run '^$$' -bench LoopGatewayOverhead -benchtime 20x -count 3 ./internal/runner/
	$(GO) test -run '^$$' -bench RunShellCalls -benchtime 5x -count 3 ./internal/runner/
	$(GO) test -run '^$$' -bench RunRelayed -benchtime 5x -count 3 ./internal/runner/
	$(GO) test -run '^$$' -bench Throughput -benchtime 2x -count 3 ./internal/relay/
	$(GO) test -run '^$$' -bench TerminalEcho -benchtime 200x -count 3 ./internal/relay/noderpc/
	$(GO) test -run '^$$' -bench '^BenchmarkOutput$$' -benchtime 3x -count 3 ./internal/relay/noderpc/
	$(GO) test -run '^$$' -bench HTTPSLatency -benchtime 2000x -count 3 ./internal/proxy/
	$(GO) test -run '^$$' -bench Download100MB -benchtime 6x -count 3 ./internal/proxy/
	$(GO) test -run '^$$' -bench StageDisk -benchtime 40x -count 3 ./internal/workspace/
	$(GO) test -run '^$$' -bench BackupDuringRuns -benchtime 4x ./cmd/corral/
	$(GO) test -run '^$$' -bench Failover -benchtime 10x ./cmd/corral/
	$(GO) test -run '^$$' -bench RunCreation -benchtime 3x ./cmd/corral/
	$(GO) test -run '^$$' -bench '^Benchmark(Search|Index)$$' -benchtime 1x -count 3 ./internal/retrieval/
	$(GO) test -run '^$$' -bench RetrievalEval -benchtime 1x ./internal/retrieval/
	CORRAL_BENCH_FULL=1 $(GO) test -run '^$$' -bench StageManifestVsNaive -benchtime 3x -timeout 60m ./internal/workspace/

clean:
	rm -rf bin internal/webui/dist web/node_modules
