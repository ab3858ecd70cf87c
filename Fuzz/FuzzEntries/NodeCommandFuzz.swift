import RevueNodeProtocol

extension FuzzEntries {
    /// revue-node command lines (`NodeCommandLine.parse`, RevueNodeProtocol): any line gives a blank,
    /// a typed command or an error event, never a crash. A parsed command, written back with
    /// `NodeCommandLine.encode`, parses to the same request, and so does the next write and parse.
    /// An error's event always names an error.
    ///
    /// Numbers are compared to within one unit in the last place: Foundation's `JSONSerialization`
    /// reads some decimals one ULP off (`2.5555555555555556e+28` comes back as its neighbour
    /// `2.555555555555556e+28`, where `Double(_:)` and `JSONDecoder` read it exactly), so a `seconds` or `timeout`
    /// may move by one ULP through a line. Everything else must come back identical.
    /// The input is split at newlines like revue-node's stdin (`readLine`), at most 64 lines.
    @Sendable public static func nodeCommand(_ data: UnsafeRawBufferPointer) {
        var lines = 0
        for slice in data.split(separator: 0x0A, omittingEmptySubsequences: false) where lines < 64 {
            lines += 1
            let line = String(decoding: slice, as: UTF8.self)
            switch NodeCommandLine.parse(line) {
            case .blank:
                fuzzRequire(
                    line.unicodeScalars.allSatisfy { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator },
                    "non-blank line \(line.debugDescription) read as blank")
            case .error(let e):
                fuzzRequire(
                    !e.error.isEmpty && e.event["event"] as? String == "error",
                    "error without a name for \(line.debugDescription)")
            case .request(let request):
                fuzzRequire(
                    request.name == NodeCommandLine.name(of: request.command),
                    "command \(request.command) parsed from cmd \(request.name.debugDescription)")
                let written = NodeCommandLine.encode(request)
                guard case .request(let again) = NodeCommandLine.parse(written) else {
                    fuzzRequire(false, "written command does not parse: \(written)"); continue
                }
                fuzzRequire(sameRequest(again, request), "command changed through its line: \(request) -> \(written) -> \(again)")
                guard case .request(let third) = NodeCommandLine.parse(NodeCommandLine.encode(again)) else {
                    fuzzRequire(false, "rewritten command does not parse: \(NodeCommandLine.encode(again))"); continue
                }
                fuzzRequire(sameRequest(third, again), "command line is not stable: \(again) -> \(third)")
            }
        }
    }
}

/// Requests equal except that each `Double` field may differ by one ULP (see `nodeCommand`).
func sameRequest(_ a: NodeRequest, _ b: NodeRequest) -> Bool {
    func close(_ x: Double, _ y: Double) -> Bool { x == y || x.nextUp == y || x.nextDown == y }
    guard a.name == b.name, a.id == b.id else { return false }
    switch (a.command, b.command) {
    case (.message(let f1, let m1, let t1), .message(let f2, let m2, let t2)): return f1 == f2 && m1 == m2 && close(t1, t2)
    case (.callMessage(let m1, let to1, let t1), .callMessage(let m2, let to2, let t2)):
        return m1 == m2 && to1 == to2 && close(t1, t2)
    case (.feed(let s1, let t1), .feed(let s2, let t2)): return close(s1, s2) && close(t1, t2)
    default: return a.command == b.command
    }
}
