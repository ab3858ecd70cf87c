// swift-tools-version:6.0
// Revue: a real-time media engine for Linux Swift programs. See docs/ and ../shared/DESIGN.md.
import PackageDescription

let package = Package(
    name: "Revue",
    products: [
        .library(name: "RevueSDK", targets: ["RevueSDK"]),
        .executable(name: "revue-media", targets: ["revue-media"]),
        .executable(name: "revue-node", targets: ["revue-node"]),
        .executable(name: "revue-bench", targets: ["revue-bench"]),
    ],
    targets: [
        // C shims over the Debian -dev packages (see scripts/install-deps). libyuv ships no .pc file,
        // so every library is linked by name.
        .target(
            name: "CMediaShims",
            linkerSettings: [
                .linkedLibrary("opus"), .linkedLibrary("vpx"), .linkedLibrary("yuv"),
                .linkedLibrary("speexdsp"), .linkedLibrary("srtp2"), .linkedLibrary("sodium"),
            ]
        ),
        .target(name: "MediaCore", dependencies: ["CMediaShims"]),
        .target(name: "RevueSession", dependencies: ["MediaCore", "CMediaShims"]),
        .target(name: "RevueSDK", dependencies: ["MediaCore", "RevueSession"]),
        .executableTarget(name: "revue-media", dependencies: ["RevueSDK"]),
        // revue-node's command-line protocol (JSON lines to typed commands), a library so that
        // fuzz-node-command can reach it.
        .target(name: "RevueNodeProtocol", dependencies: ["RevueSession"]),
        .executableTarget(name: "revue-node", dependencies: ["RevueSDK", "RevueNodeProtocol"]),
        // Counting malloc-family wrappers defined in the revue-bench executable (heap allocations per
        // frame in `videosend`). Only ever a dependency of revue-bench: it replaces malloc process-wide.
        .target(name: "CBenchAlloc", path: "Benchmarks/CBenchAlloc"),
        .executableTarget(name: "revue-bench", dependencies: ["MediaCore", "CMediaShims", "RevueSession", "CBenchAlloc"],
                          path: "Benchmarks/revue-bench"),
        .testTarget(name: "MediaCoreTests", dependencies: ["MediaCore", "CMediaShims", "FuzzEntries"]),
        .testTarget(name: "RevueSessionTests", dependencies: ["RevueSession", "CMediaShims", "RevueNodeProtocol"]),
        .testTarget(name: "RevueSDKTests", dependencies: ["RevueSDK"]),
        // The reference's Swift examples, compiled unchanged (they are written in Swift 5 style).
        .testTarget(name: "ReferenceExampleTests", dependencies: ["RevueSDK"],
                    swiftSettings: [.swiftLanguageMode(.v5)]),
        // Interop against independent peers: GStreamer, ffmpeg, tshark, opus-tools.
        .testTarget(name: "InteropTests", dependencies: ["MediaCore", "CMediaShims"]),
    ],
    swiftLanguageModes: [.v6]
)

// Fuzzing (docs/robustness.md): one libFuzzer executable per parser, all calling the "fuzz one
// input" functions of FuzzEntries, which the regression tests replay too. Built by scripts/fuzz
// with `--sanitize=fuzzer --sanitize=address`.
let fuzzTargets = ["fuzz-rtp", "fuzz-rtcp", "fuzz-vp8", "fuzz-vp9", "fuzz-opus", "fuzz-srtp", "fuzz-y4m", "fuzz-wav",
                   "fuzz-ivf", "fuzz-oggopus", "fuzz-sdp", "fuzz-datagram",
                   "fuzz-address", "fuzz-session", "fuzz-node-command", "fuzz-rendezvous"]
package.targets.append(.target(name: "FuzzEntries", dependencies: ["MediaCore", "RevueSession", "RevueNodeProtocol"],
                               path: "Fuzz/FuzzEntries"))
for name in fuzzTargets {
    package.products.append(.executable(name: name, targets: [name]))
    package.targets.append(.executableTarget(name: name, dependencies: ["FuzzEntries"], path: "Fuzz/\(name)"))
}
// Writes the seed corpora from our own writers and packetizers (scripts/make-fuzz-corpus).
package.targets.append(.executableTarget(name: "fuzz-seeds", dependencies: ["FuzzEntries", "MediaCore", "RevueSession", "RevueNodeProtocol"],
                                         path: "Fuzz/fuzz-seeds"))

// Soak and fault runs (docs/soak.md, `make soak`): long calls, floods, kill -9. Not part of `make test`.
package.products.append(.executable(name: "revue-soak", targets: ["revue-soak"]))
package.targets.append(.executableTarget(name: "revue-soak", dependencies: ["RevueSDK"], path: "Soak/revue-soak"))
