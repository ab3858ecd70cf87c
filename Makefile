# Revue's commands. Each installs the Debian packages it needs first (scripts/install-deps).
SWIFT ?= swift
OUT ?= out
SECONDS ?= 10

.PHONY: deps demo test bench build release clean

deps:
	@scripts/install-deps

## make demo: a full call in one process over loopback UDP; writes $(OUT)/received.* and stats.json
demo: deps
	$(SWIFT) build -c release --product revue-media
	$$($(SWIFT) build -c release --show-bin-path)/revue-media demo --seconds $(SECONDS) --out $(OUT)

# The session tests assert timing (a friend offline within 2 s); they run first, on their own,
# so the CPU-heavy codec tests running in parallel cannot starve them on a 2-core machine.
TIMED_TESTS = RevueSessionTests|ReferenceExampleTests

## make test: builds and runs the whole test suite
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter '$(TIMED_TESTS)'
	$(SWIFT) test --skip-build --skip '$(TIMED_TESTS)'

## make bench: every benchmark suite (release build), results in docs/performance.md form
bench: deps
	$(SWIFT) build -c release --product revue-bench
	$$($(SWIFT) build -c release --show-bin-path)/revue-bench all --json $(OUT)/bench.json

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

clean:
	rm -rf .build $(OUT)
