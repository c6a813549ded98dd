# The README's commands. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

# Every module of the workspace (go.work), or the root module alone.
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)

.PHONY: test deps lint fmt-check tidy tidy-check vet staticcheck race fuzz bench bench-report serve stress

## test: install what a fresh machine lacks, then lint and run every module's tests with the race detector.
test: deps lint race

## deps: what the tests need from Debian's packages when it is missing: redis-server (tests start their own on
## a free port: single servers, a Cluster with replicas, and a Sentinel setup, whose sentinels are
## redis-server --sentinel, so redis-sentinel is not needed), kcat (librdkafka's client, an independent check of the Kafka republisher) and chromium (the
## dashboard's browser tests drive it headless; nothing downloads a browser), curl (the README's curl -d, checked
## against the server's cross-origin rules), python3-confluent-kafka (librdkafka from Debian's /usr/bin/python3:
## kafkadelay's TestPythonProducer produces delayed records following docs/kafka.md only).
DEBIAN_DEPS := redis-server:redis-server kcat:kcat chromium:chromium curl:curl
## Python modules Debian packages, checked by importing them with Debian's interpreter (module:package).
DEBIAN_PY_DEPS := confluent_kafka:python3-confluent-kafka
deps:
	@missing=""; for d in $(DEBIAN_DEPS); do cmd=$${d%%:*}; pkg=$${d##*:}; \
		command -v $$cmd >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	for d in $(DEBIAN_PY_DEPS); do mod=$${d%%:*}; pkg=$${d##*:}; \
		/usr/bin/python3 -c "import $$mod" >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian packages)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; fi
	@for d in $(DEBIAN_DEPS); do cmd=$${d%%:*}; command -v $$cmd >/dev/null 2>&1 || { echo "$$cmd is still missing"; exit 1; }; done
	@for d in $(DEBIAN_PY_DEPS); do mod=$${d%%:*}; /usr/bin/python3 -c "import $$mod" >/dev/null 2>&1 || { echo "/usr/bin/python3 cannot import $$mod"; exit 1; }; done

lint: fmt-check tidy-check vet staticcheck

## tidy-check: every module's go.mod and go.sum are what `go mod tidy` writes (the tree's modules served at their required version by a local module proxy; see scripts/tidy-check.sh).
tidy-check:
	@GO=$(GO) bash scripts/tidy-check.sh

## tidy: go mod tidy in every module, the tree's modules served by the same local proxy.
tidy:
	@GO=$(GO) bash scripts/tidy-check.sh --write

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

staticcheck:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@SC=$$(command -v staticcheck || echo $$($(GO) env GOPATH)/bin/staticcheck); \
	for m in $(MODULES); do (cd $$m && $$SC ./...) || exit 1; done

race:
	@for m in $(MODULES); do echo "== go test -race $$m"; (cd $$m && $(GO) test -race -timeout 15m ./...) || exit 1; done
	@echo "== go test (no -race: checkptr would stop it) the embedded store reading damaged files unchecked"
	$(GO) test -count=1 -run 'TestFlippedBytesAnywhere' ./ontimedriver/ontimebolt/

## fuzz: a short run of every fuzz target (go test -fuzz) of every module, FUZZTIME each (default 30s).
## It runs on Go FUZZ_GOTOOLCHAIN (default go1.27.3, fetched by the go command from the module proxy): Go 1.26's
## fuzzing coordinator can fail a target with "context deadline exceeded" when -fuzztime ends (go.dev/issue/75804,
## fixed in 1.27); the code itself builds with the Go of go.mod.
FUZZTIME ?= 30s
FUZZ_GOTOOLCHAIN ?= go1.27.3
fuzz:
	@for m in $(MODULES); do (cd $$m && for p in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			echo "== $$p $$f"; GOTOOLCHAIN=$(FUZZ_GOTOOLCHAIN) $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; done) || exit 1; done

## stress: the long crash and chaos tests of internal/chaos (SIGKILLed workers, Redis restarts and pauses, and the
## failover runs: a Cluster master and a Sentinel primary SIGKILLed under 20,000 timers, about 5 minutes of the run)
## and the Kafka republisher's soak (churn and produce faults); -tags stress, several minutes.
stress: deps
	$(GO) test -race -tags stress -count=1 -timeout 60m -v ./internal/chaos/
	cd kafkadelay && $(GO) test -race -tags stress -count=1 -timeout 20m -run 'TestSoak' -v .

## bench: the Go benchmarks of the library and drivers.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-report: the peer benchmarks (ontime, asynq, river, raw Redis); rewrites docs/BENCHMARKS.md and docs/bench/* (about 8 minutes).
bench-report: deps
	$(GO) run ./bench/cmd/ontime-bench -out docs
