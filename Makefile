# The README's commands. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
STATICCHECK_VERSION ?= v0.8.2

# Every module of the workspace (go.work), or the root module alone.
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)

.PHONY: test deps lint fmt-check tidy-check vet staticcheck race fuzz bench bench-report serve stress

## test: install what a fresh machine lacks, then lint and run every module's tests with the race detector.
test: deps lint race

## deps: redis-server from Debian's packages when it is missing (tests start their own on a free port).
deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server (Debian package)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; }
	@command -v redis-server >/dev/null 2>&1 || { echo "redis-server is still missing"; exit 1; }

lint: fmt-check tidy-check vet staticcheck

## tidy-check: every module's go.mod and go.sum are what `go mod tidy` writes (the tree's modules served at their required version by a local module proxy; see scripts/tidy-check.sh).
tidy-check:
	@GO=$(GO) bash scripts/tidy-check.sh

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
FUZZTIME ?= 30s
fuzz:
	@for m in $(MODULES); do (cd $$m && for p in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			echo "== $$p $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; done) || exit 1; done

## stress: the long crash and chaos tests of internal/chaos (SIGKILLed workers, Redis restarts and pauses; -tags stress, several minutes).
stress: deps
	$(GO) test -race -tags stress -count=1 -timeout 60m -v ./internal/chaos/

## bench: the Go benchmarks of the library and drivers.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-report: the peer benchmarks (ontime, asynq, river, raw Redis); rewrites docs/BENCHMARKS.md and docs/bench/* (about 8 minutes).
bench-report: deps
	$(GO) run ./bench/cmd/ontime-bench -out docs
