# Revue's commands. Each installs the Debian packages it needs first (scripts/install-deps).
SWIFT ?= swift
OUT ?= out
SECONDS ?= 10

.PHONY: deps demo test test-e2e bench build release clean fuzz fuzz-smoke test-sanitizers docs lint format api-surface api-baseline

deps:
	@scripts/install-deps

## make demo: a full call in one process over loopback UDP; writes $(OUT)/received.* and stats.json
demo: deps
	$(SWIFT) build -c release --product revue-media
	$$($(SWIFT) build -c release --show-bin-path)/revue-media demo --seconds $(SECONDS) --out $(OUT)

## make test: checks the formatting (make lint), builds the tests and runs those that read no wall
## clock (units, the file-only interop suites, whole sessions on simulated time) and one end-to-end
## exchange with each real peer (GStreamer, Chromium, Janus, coturn, a NAT in the network lab);
## prints each phase's time and CPU time (scripts/test).
test: deps lint
	SWIFT=$(SWIFT) scripts/test

## make test-e2e: the real-time tests (pipelines on the wall clock, peers on loopback, revue-node
## processes, every interop suite, the network lab), in phases that keep timing tests apart from
## busy neighbours, then FUZZ_SMOKE_RUNS inputs of every fuzz target (at most FUZZ_SMOKE_SECONDS
## each). Run it after `make test` (it reuses its build).
test-e2e: deps
	SWIFT=$(SWIFT) FUZZ_SMOKE_RUNS=$(FUZZ_SMOKE_RUNS) FUZZ_SMOKE_SECONDS=$(FUZZ_SMOKE_SECONDS) scripts/test e2e

## make bench: every benchmark suite (release build), results in docs/performance.md form
##   BENCH_ARGS passes options (e.g. BENCH_ARGS="ring --reps 9"); charts go to docs/performance/.
BENCH_ARGS ?= all
bench: deps
	$(SWIFT) build -c release --product revue-bench
	$(SWIFT) build -c release --product revue-media
	$$($(SWIFT) build -c release --show-bin-path)/revue-bench $(BENCH_ARGS) --json $(OUT)/bench.json --svg docs/performance

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## make fuzz: every libFuzzer target (Fuzz/, docs/robustness.md) for FUZZ_SECONDS each, one target
## per core at a time; crash inputs are kept in Fuzz/crashes/<target>/ (commit them: the tests replay them)
FUZZ_SECONDS ?= 180
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz

## make fuzz-smoke: builds every fuzz target and runs each on FUZZ_SMOKE_RUNS inputs from a fixed
## seed (repeatable; a broken harness fails), stopping a slow target after FUZZ_SMOKE_SECONDS.
## The same run ends `make test-e2e`.
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_SMOKE_SECONDS ?= 8
fuzz-smoke: deps
	FUZZ_RUNS=$(FUZZ_SMOKE_RUNS) FUZZ_MAX_SECONDS=$(FUZZ_SMOKE_SECONDS) FUZZ_SCRATCH=.build-fuzz-smoke scripts/fuzz

## make test-sanitizers: the concurrency and pipeline tests under ThreadSanitizer, the parser, codec
## and container tests and the fuzz corpus replay under AddressSanitizer, each build in its own
## scratch path (.build-tsan, .build-asan); docs/robustness.md says what runs and what it found.
## `make test-sanitizers SANITIZE_SET=ci` is the shorter set .ci/run adds when CI=true.
SANITIZE_SET ?= full
# Only the test bundle and the libraries it links are built (not revue-media, revue-bench, the fuzz
# executables...): nothing else runs under a sanitizer, and the builds take most of the time.
SANITIZE_BUILD = $(SWIFT) build --product RevuePackageTests
# With them the WebRTC peer connection on loopback (ICE, DTLS, send streams, receive pipeline,
# renegotiation, a coturn relay: every thread of a connection at once), about 30 s under TSan.
TSAN_TESTS_full = (MediaCoreTests|MediaRealtimeTests)\.[A-Za-z]*(Ring|FramePool|Capturer|Send|Receive|UDP|Relay|WorkerThread|PacketSink|ICE)[A-Za-z]*Tests|InteropTests\.PeerConnectionTests
# Left out under TSan: these assert real-time media quality (audio concealed under 2-3 %, frames
# shown, bitrate recovered within seconds) from a test sender that paces itself by the wall clock.
# TSan makes encoding and decoding 5-20x slower, so sender and receiver fall behind real time and
# audio is concealed for lateness, not for a race (measured: 9-51 % concealed, no TSan report).
# Their bounds stay as they are; they run unsanitized in `make test-e2e`. Also left out: the
# simulated-time suites, which run the pipeline on the test's one thread (no race to find).
TSAN_SKIP_full = Simulated|decodesEveryFrameAndPlaysAudioFromOurSenderOverLoopback
ASAN_TESTS_full = (MediaCoreTests|MediaRealtimeTests)\.[A-Za-z]*(RTP|RTCP|VP8|VP9|VPX|Opus|SRTP|SFrame|STUN|Y4M|WAV|IVF|Ogg|SDP|JSEP|DTLS|Janus|HTTPMessage|ColorConverter|Resampler|AudioProcessor|PixelBufferView|FuzzRegression)[A-Za-z]*Tests
ASAN_SKIP_full =
# The CI set: the same suites without the exact allocation-count tests. Those count mallocs, which
# the sanitizer runtimes replace, so they check nothing a sanitizer adds, and under TSan or ASan
# they take a minute each (VideoReceiveStream's steady state: 52 s; ColorConverter's: 51 s).
TSAN_TESTS_ci = $(TSAN_TESTS_full)
TSAN_SKIP_ci = $(TSAN_SKIP_full)|[Aa]llocat
ASAN_TESTS_ci = $(ASAN_TESTS_full)
ASAN_SKIP_ci = [Aa]llocat
TSAN_TESTS ?= $(TSAN_TESTS_$(SANITIZE_SET))
TSAN_SKIP ?= $(TSAN_SKIP_$(SANITIZE_SET))
ASAN_TESTS ?= $(ASAN_TESTS_$(SANITIZE_SET))
ASAN_SKIP ?= $(ASAN_SKIP_$(SANITIZE_SET))
# The TSan tests run one at a time, as in `make test-e2e`: the pipeline tests run real-time threads.
# scripts/tsan-mutex.c tells TSan about Synchronization.Mutex's contended paths, which run in the
# uninstrumented toolchain library: without it TSan reports false races on Mutex-protected data.
TSAN_MUTEX = $(CURDIR)/.build-tsan/tsan-mutex.so
test-sanitizers: deps
	@test -n '$(TSAN_TESTS)' || { echo "SANITIZE_SET must be full or ci" >&2; exit 2; }
	$(SANITIZE_BUILD) --sanitize=thread --scratch-path .build-tsan
	clang -shared -fPIC -O1 -o $(TSAN_MUTEX) scripts/tsan-mutex.c -ldl
	LD_PRELOAD=$(TSAN_MUTEX) SWIFT_BACKTRACE=enable=no TSAN_OPTIONS=halt_on_error=1 \
		$(SWIFT) test --skip-build --no-parallel --sanitize=thread --scratch-path .build-tsan \
		--filter '$(TSAN_TESTS)' $(if $(TSAN_SKIP),--skip '$(TSAN_SKIP)')
	$(SANITIZE_BUILD) --sanitize=address --scratch-path .build-asan
	SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 \
		$(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan \
		--filter '$(ASAN_TESTS)' $(if $(ASAN_SKIP),--skip '$(ASAN_SKIP)')

clean:
	rm -rf .build $(OUT)

## make soak: the soak and fault runs of docs/soak.md (minutes; not part of CI): a SOAK_MINUTES
## A/V call through the impairment relay with changing loss and jitter (RSS, threads, stats
## consistency, a full capture ring), a flood of forged datagrams from a second process, and
## kill -9 of a revue-node mid-call and mid-write. Debug build by default (SOAK_CONFIG=release).
SOAK_MINUTES ?= 10
SOAK_CONFIG ?= debug
.PHONY: soak
soak: deps
	$(SWIFT) build -c $(SOAK_CONFIG) --product revue-node
	$(SWIFT) build -c $(SOAK_CONFIG) --product revue-soak
	$$($(SWIFT) build -c $(SOAK_CONFIG) --show-bin-path)/revue-soak call --minutes $(SOAK_MINUTES)
	$$($(SWIFT) build -c $(SOAK_CONFIG) --show-bin-path)/revue-soak flood-test
	$$($(SWIFT) build -c $(SOAK_CONFIG) --show-bin-path)/revue-soak kill-test

## make docs: the DocC reference of RevueSDK and RevueMedia into $(OUT)/docs (static sites), from the
## compiler's symbol graphs and the catalogs in Sources/*/*.docc; a broken symbol link fails it.
docs: deps
	$(SWIFT) build --target RevueSDK
	$(SWIFT) build --target RevueMedia
	scripts/build-docs $(OUT)/docs

## make api-baseline: records the public API of RevueSDK and RevueMedia in api/ (make test fails
## when the built API differs from it: commit a meant change with its api/ file).
api-baseline: deps
	$(SWIFT) build --target RevueSDK
	$(SWIFT) build --target RevueMedia
	scripts/api-baseline --write

## make api-surface: counts the public types, declarations and Unsafe* signatures of each library.
api-surface: deps
	$(SWIFT) build --target RevueSDK
	$(SWIFT) build --target RevueMedia
	scripts/api-surface RevueSDK RevueMedia

## make lint: swift-format (from the toolchain) checks every Swift file against .swift-format, and
## scripts/check-inlinable that no `@inlinable` member sits in a package type the compiler would
## not inline from other modules; make format rewrites the files in place.
SWIFT_FORMAT ?= swift-format
FORMAT_PATHS = Package.swift Sources Tests Benchmarks Soak Fuzz
lint:
	$(SWIFT_FORMAT) lint --strict --recursive --parallel $(FORMAT_PATHS)
	scripts/check-inlinable Sources

format:
	$(SWIFT_FORMAT) format --in-place --recursive --parallel $(FORMAT_PATHS)
