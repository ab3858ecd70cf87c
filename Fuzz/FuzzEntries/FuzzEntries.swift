import Synchronization

/// The "fuzz one input" functions of every Revue fuzz target, shared by the libFuzzer executables
/// (`Fuzz/fuzz-*`, built by `scripts/fuzz`) and the regression tests that replay
/// `Fuzz/corpus` and `Fuzz/crashes` in a normal debug build (`FuzzRegressionTests`).
///
/// Each entry feeds arbitrary bytes to one parser the way the engine does with network or file
/// input, then checks properties that must hold for every input (a parsed packet re-marshals and
/// parses back to the same value, our TOC arithmetic agrees with libopus...). A violated property
/// traps through `fuzzRequire`, so libFuzzer records the input like any other crash.
/// Thread rule: any thread; the entries that keep per-process scratch state (a decoder, SRTP
/// contexts, the container file) take `fuzzScratch` for the input, so tests running in parallel
/// can call them.
/// Cost: per input, a handful of parses; the container entries write one temporary file.
public enum FuzzEntries {
    /// One fuzz target: its executable/corpus name and the function that runs one input.
    public struct Target: Sendable {
        /// Directory name under `Fuzz/corpus` and `Fuzz/crashes`, and the executable name.
        public let name: String
        /// Runs one input; traps on a crash or a violated property, returns otherwise.
        public let run: @Sendable (UnsafeRawBufferPointer) -> Void
    }

    /// Every target, in the order `scripts/fuzz` runs them.
    public static let targets: [Target] = [
        Target(name: "fuzz-rtp", run: rtp),
        Target(name: "fuzz-rtcp", run: rtcp),
        Target(name: "fuzz-vp8", run: vp8),
        Target(name: "fuzz-vp9", run: vp9),
        Target(name: "fuzz-opus", run: opus),
        Target(name: "fuzz-srtp", run: srtp),
        Target(name: "fuzz-y4m", run: y4m),
        Target(name: "fuzz-wav", run: wav),
        Target(name: "fuzz-ivf", run: ivf),
        Target(name: "fuzz-oggopus", run: oggOpus),
        Target(name: "fuzz-sdp", run: sdp),
        Target(name: "fuzz-datagram", run: datagram),
        Target(name: "fuzz-address", run: address),
        Target(name: "fuzz-session", run: session),
        Target(name: "fuzz-node-command", run: nodeCommand),
        Target(name: "fuzz-rendezvous", run: rendezvous),
        Target(name: "fuzz-stun", run: stun),
        Target(name: "fuzz-call-signal", run: callSignal),
        Target(name: "fuzz-dtls", run: dtls),
        Target(name: "fuzz-sframe", run: sframe),
        Target(name: "fuzz-http", run: http),
        Target(name: "fuzz-websocket", run: webSocket),
        Target(name: "fuzz-dcep", run: dcep),
    ]

    /// The target called `name`, nil when there is none.
    public static func target(named name: String) -> Target? { targets.first { $0.name == name } }
}

/// Held by the entries that reuse per-process scratch state while they run one input.
let fuzzScratch = Mutex(())

/// Traps with `message` when a property every input must satisfy does not hold: libFuzzer then
/// keeps the input as a crash, and the regression test replaying it fails.
@inline(__always)
func fuzzRequire(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz property violated: \(message())") }
}

/// Splits a fuzz input into records of `[length: UInt16 big-endian][bytes]` (the last record gets
/// whatever is left when its length overruns), so one input can carry a packet sequence.
func fuzzRecords(_ data: UnsafeRawBufferPointer, limit: Int = 256) -> [UnsafeRawBufferPointer] {
    var out: [UnsafeRawBufferPointer] = []
    var at = 0
    while at + 2 <= data.count, out.count < limit {
        let n = min(Int(data[at]) << 8 | Int(data[at + 1]), data.count - at - 2)
        out.append(UnsafeRawBufferPointer(rebasing: data[(at + 2)..<(at + 2 + n)]))
        at += 2 + n
    }
    return out
}
