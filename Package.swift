// swift-tools-version:6.0
// Revue: a real-time media engine for Linux Swift programs. See README.md and docs/architecture.md.
import PackageDescription

let package = Package(
    name: "Revue",
    // What dependents see: the SDK for apps, the engine for programs that build their own media
    // paths, and the two command-line tools. The benchmark, soak and fuzz executables below are
    // this package's own tools (SwiftPM still builds and runs them here by name), not products.
    products: [
        .library(name: "RevueSDK", targets: ["RevueSDK"]),
        .library(name: "RevueMedia", targets: ["RevueMedia"]),
        .executable(name: "revue-media", targets: ["revue-media"]),
        .executable(name: "revue-node", targets: ["revue-node"]),
    ],
    targets: [
        // C shims over the Debian -dev packages (see scripts/install-deps). libyuv ships no .pc file,
        // so every library is linked by name.
        .target(
            name: "CMediaShims",
            linkerSettings: [
                .linkedLibrary("opus"), .linkedLibrary("vpx"), .linkedLibrary("yuv"),
                .linkedLibrary("speexdsp"), .linkedLibrary("srtp2"), .linkedLibrary("sodium"),
                .linkedLibrary("crypto"), .linkedLibrary("ssl"), .linkedLibrary("usrsctp"),
            ]
        ),
        .target(name: "MediaCore", dependencies: ["CMediaShims"]),
        .target(name: "RevueSession", dependencies: ["MediaCore", "CMediaShims"]),
        // RevueSDK re-exports the session API and the few media types it hands to apps;
        // RevueMedia re-exports the whole engine.
        .target(name: "RevueSDK", dependencies: ["MediaCore", "RevueSession"]),
        .target(name: "RevueMedia", dependencies: ["MediaCore"]),
        // The argument parser, help text and exit statuses shared by the four executables.
        .target(name: "RevueCommandLine", dependencies: ["MediaCore"]),
        .executableTarget(name: "revue-media", dependencies: ["MediaCore", "RevueSession", "RevueCommandLine"]),
        // revue-node's line protocol (JSON lines to typed commands, typed events to JSON lines), a
        // library so that fuzz-node-command and the tests can reach it.
        .target(name: "RevueNodeProtocol", dependencies: ["MediaCore", "RevueSession"]),
        .executableTarget(
            name: "revue-node", dependencies: ["MediaCore", "RevueSession", "RevueNodeProtocol", "RevueCommandLine"]),
        // Counting malloc-family wrappers defined in the revue-bench executable (heap allocations per
        // frame in `videosend`). Only ever a dependency of revue-bench: it replaces malloc process-wide.
        .target(name: "CBenchAlloc", path: "Benchmarks/CBenchAlloc"),
        .executableTarget(
            name: "revue-bench", dependencies: ["MediaCore", "CMediaShims", "RevueSession", "CBenchAlloc", "RevueCommandLine"],
            path: "Benchmarks/revue-bench"),
        // MediaCoreTests: parsers, codecs, containers, SRTP, SDP; no threads, no wall clock, so they
        // run in parallel. MediaRealtimeTests: the rings, capture, send and receive pipelines, UDP,
        // the relay, the ICE agent and DTLS over sockets, and the exact allocation counts, run one
        // at a time (scripts/test). MediaTestSupport holds what the test targets share: the
        // allocation counter, signal measures, a seeded generator, the external-process runner.
        .target(name: "MediaTestSupport", dependencies: ["MediaCore"], path: "Tests/MediaTestSupport"),
        .testTarget(name: "MediaCoreTests", dependencies: ["MediaCore", "CMediaShims", "FuzzEntries", "MediaTestSupport"]),
        .testTarget(name: "MediaRealtimeTests", dependencies: ["MediaCore", "CMediaShims", "MediaTestSupport"]),
        .testTarget(
            name: "RevueSessionTests", dependencies: ["RevueSession", "CMediaShims", "RevueNodeProtocol", "MediaTestSupport"]),
        .testTarget(name: "RevueSDKTests", dependencies: ["RevueSDK", "RevueMedia"]),
        .testTarget(name: "RevueCommandLineTests", dependencies: ["RevueCommandLine"]),
        // Friend, invitation and call scenarios written against `import RevueSDK` alone, as an app would.
        .testTarget(name: "SDKScenarioTests", dependencies: ["RevueSDK", "RevueMedia"]),
        // Interop against independent peers: GStreamer, ffmpeg, tshark, opus-tools.
        .testTarget(name: "InteropTests", dependencies: ["MediaCore", "CMediaShims", "MediaTestSupport"]),
        // The WebRTC peer-connection API written against `import RevueMedia` alone, as an app would:
        // two peers on loopback, an aiortc peer, the whip-echo example over HTTP.
        .testTarget(name: "RevueMediaAppTests", dependencies: ["RevueMedia"]),
        // Examples: small programs on the public products, built with the tests.
        .executableTarget(name: "whip-echo", dependencies: ["RevueMedia"], path: "Examples/whip-echo"),
    ],
    swiftLanguageModes: [.v6]
)

// Fuzzing (docs/robustness.md): one libFuzzer executable per parser, all calling the "fuzz one
// input" functions of FuzzEntries, which the regression tests replay too. Built by scripts/fuzz
// with `--sanitize=fuzzer --sanitize=address`.
let fuzzTargets = [
    "fuzz-rtp", "fuzz-rtcp", "fuzz-vp8", "fuzz-vp9", "fuzz-opus", "fuzz-srtp", "fuzz-y4m", "fuzz-wav",
    "fuzz-ivf", "fuzz-oggopus", "fuzz-sdp", "fuzz-datagram",
    "fuzz-address", "fuzz-session", "fuzz-node-command", "fuzz-rendezvous", "fuzz-stun", "fuzz-call-signal", "fuzz-dtls",
    "fuzz-sframe", "fuzz-http", "fuzz-websocket",
]
package.targets.append(
    .target(
        name: "FuzzEntries", dependencies: ["MediaCore", "RevueSession", "RevueNodeProtocol"],
        path: "Fuzz/FuzzEntries"))
for name in fuzzTargets {
    package.targets.append(.executableTarget(name: name, dependencies: ["FuzzEntries"], path: "Fuzz/\(name)"))
}
// Writes the seed corpora from our own writers and packetizers (scripts/make-fuzz-corpus).
package.targets.append(
    .executableTarget(
        name: "fuzz-seeds", dependencies: ["FuzzEntries", "MediaCore", "RevueSession", "RevueNodeProtocol"],
        path: "Fuzz/fuzz-seeds"))

// Soak and fault runs (docs/soak.md, `make soak`): long calls, floods, kill -9. Not part of `make test`.
package.targets.append(
    .executableTarget(
        name: "revue-soak", dependencies: ["MediaCore", "RevueSession", "RevueCommandLine"], path: "Soak/revue-soak"))
