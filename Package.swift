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
        // The media engine, in layers; each module may import only the ones above it in this list,
        // and the compiler holds it to that (docs/architecture.md, "Modules").
        // Base types: clocks and schedulers, rings and locks, atomic files, JSON, libsodium, stats.
        // `Lifetimes` lets `SpanReader` (Bytes/ByteReader.swift) be a non-escapable cursor over a
        // `RawSpan`; the modules that use it need no flag.
        .target(
            name: "MediaBase", dependencies: ["CMediaShims"],
            swiftSettings: [.enableExperimentalFeature("Lifetimes")]),
        // Raw media: video and audio frames, pixel formats, frame pools, synthetic sources.
        .target(name: "MediaFrames", dependencies: ["MediaBase", "CMediaShims"]),
        // Codecs (Opus, VP8/VP9, libyuv conversion, the speex resampler) and the capturers.
        .target(name: "MediaCodecs", dependencies: ["MediaFrames", "MediaBase", "CMediaShims"]),
        // Wire formats with no I/O: RTP, RTCP, payload formats, SDP, STUN, the file containers.
        .target(name: "MediaWire", dependencies: ["MediaFrames", "MediaBase", "CMediaShims"]),
        // Moving bytes: sockets, HTTP and WebSocket codecs, ICE, TURN, DTLS, SRTP, SCTP, SFrame.
        .target(name: "MediaTransport", dependencies: ["MediaWire", "MediaFrames", "MediaBase", "CMediaShims"]),
        // Send and receive pipelines: pacing, jitter buffers, playout, congestion control, RTCP.
        .target(
            name: "MediaPipeline",
            dependencies: ["MediaTransport", "MediaCodecs", "MediaWire", "MediaFrames", "MediaBase", "CMediaShims"]),
        // The WebRTC peer (JSEP, bundle, DTLS-SRTP, data channels) over the pipelines.
        .target(
            name: "MediaWebRTC",
            dependencies: [
                "MediaPipeline", "MediaTransport", "MediaCodecs", "MediaWire", "MediaFrames", "MediaBase", "CMediaShims",
            ]),
        // The Janus VideoRoom client (HTTP, WebSocket, TLS).
        .target(name: "MediaSFU", dependencies: ["MediaTransport", "MediaWire", "MediaBase", "CMediaShims"]),
        // The whole engine as one import for the package's own targets; RevueMedia re-exports it.
        .target(
            name: "MediaCore",
            dependencies: [
                "MediaBase", "MediaFrames", "MediaCodecs", "MediaWire", "MediaTransport", "MediaPipeline", "MediaWebRTC",
                "MediaSFU",
            ]),
        // Tools for testing media paths, shipped in no library: the impairment relay behind
        // `revue-media relay` and the demo, in-memory sinks, playout and ring probes.
        .target(name: "MediaTools", dependencies: ["MediaCore", "CMediaShims"]),
        .target(name: "RevueSession", dependencies: ["MediaCore", "CMediaShims"]),
        // RevueSDK re-exports the session API and the few media types it hands to apps;
        // RevueMedia re-exports the whole engine.
        .target(name: "RevueSDK", dependencies: ["MediaCore", "RevueSession"]),
        .target(name: "RevueMedia", dependencies: ["MediaCore"]),
        // The argument parser, help text and exit statuses shared by the four executables.
        .target(name: "RevueCommandLine", dependencies: ["MediaCore"]),
        .executableTarget(
            name: "revue-media", dependencies: ["MediaCore", "MediaTools", "RevueSession", "RevueCommandLine"]),
        // revue-node's line protocol (JSON lines to typed commands, typed events to JSON lines), a
        // library so that fuzz-node-command and the tests can reach it.
        .target(name: "RevueNodeProtocol", dependencies: ["MediaCore", "RevueSession"]),
        .executableTarget(
            name: "revue-node", dependencies: ["MediaCore", "RevueSession", "RevueNodeProtocol", "RevueCommandLine"]),
        // Counting malloc-family wrappers defined in the revue-bench executable (heap allocations per
        // frame in `videosend`). Only ever a dependency of revue-bench: it replaces malloc process-wide.
        .target(name: "CBenchAlloc", path: "Benchmarks/CBenchAlloc"),
        .executableTarget(
            name: "revue-bench",
            dependencies: [
                "MediaCore", "MediaTools", "CMediaShims", "RevueSession", "CBenchAlloc", "RevueCommandLine",
                // the speech playout harness (`revue-bench speech`) shared with the tests
                "MediaTestSupport",
            ],
            path: "Benchmarks/revue-bench"),
        // MediaCoreTests: parsers, codecs, containers, SRTP, SDP; no threads, no wall clock, so they
        // run in parallel. MediaRealtimeTests: the rings, capture, send and receive pipelines, UDP,
        // the relay, the ICE agent and DTLS over sockets, and the exact allocation counts, run one
        // at a time (scripts/test). MediaTestSupport holds what the test targets share: the
        // allocation counter, signal measures, a seeded generator, the external-process runner.
        .target(name: "MediaTestSupport", dependencies: ["MediaCore", "MediaTools"], path: "Tests/MediaTestSupport"),
        .testTarget(
            name: "MediaCoreTests", dependencies: ["MediaCore", "MediaTools", "CMediaShims", "FuzzEntries", "MediaTestSupport"]),
        .testTarget(
            name: "MediaRealtimeTests", dependencies: ["MediaCore", "MediaTools", "CMediaShims", "MediaTestSupport"]),
        .testTarget(
            name: "RevueSessionTests", dependencies: ["RevueSession", "CMediaShims", "RevueNodeProtocol", "MediaTestSupport"]),
        .testTarget(name: "RevueSDKTests", dependencies: ["RevueSDK", "RevueMedia"]),
        .testTarget(name: "RevueCommandLineTests", dependencies: ["RevueCommandLine"]),
        // Friend, invitation and call scenarios written against `import RevueSDK` alone, as an app would.
        .testTarget(name: "SDKScenarioTests", dependencies: ["RevueSDK", "RevueMedia"]),
        // Interop against independent peers: GStreamer, ffmpeg, tshark, opus-tools.
        .testTarget(
            name: "InteropTests", dependencies: ["MediaCore", "MediaTools", "CMediaShims", "MediaTestSupport"]),
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
    "fuzz-sframe", "fuzz-http", "fuzz-websocket", "fuzz-dcep",
]
package.targets.append(
    .target(
        name: "FuzzEntries", dependencies: ["MediaCore", "MediaTools", "RevueSession", "RevueNodeProtocol"],
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
        name: "revue-soak", dependencies: ["MediaCore", "MediaTools", "RevueSession", "RevueCommandLine"], path: "Soak/revue-soak"
    ))
