import RevueNodeProtocol

extension FuzzEntries {
    /// revue-node command lines (`NodeCommandLine.parse`, RevueNodeProtocol): any line gives a blank,
    /// a typed command or an error event, never a crash. A parsed command, written back with
    /// `NodeCommandLine.encode`, parses to the same request, and so does the next write and parse.
    /// An error's event always names an error, and its line reads back as that event.
    ///
    /// The same lines are read as revue-node's output (`NodeEvent(line:)`): any line gives an event
    /// or a thrown error, never a crash; an event read is written (`NodeEvent.line`) as a line that
    /// reads back as the same event and is written again unchanged.
    ///
    /// The input is split at newlines like revue-node's stdin (`readLine`), at most 64 lines.
    @Sendable public static func nodeCommand(_ data: UnsafeRawBufferPointer) {
        var lines = 0
        for slice in data.split(separator: 0x0A, omittingEmptySubsequences: false) where lines < 64 {
            lines += 1
            let line = String(decoding: slice, as: UTF8.self)
            switch NodeCommandLine.parse(line) {
            case .blank:
                fuzzRequire(
                    line.allSatisfy(\.isWhitespace),
                    "non-blank line \(line.debugDescription) read as blank")
            case .error(let e):
                fuzzRequire(
                    !e.error.isEmpty && e.event.name == "error",
                    "error without a name for \(line.debugDescription)")
                let reply = e.event.line
                fuzzRequire(
                    reply.flatMap { try? NodeEvent(line: $0) } == e.event,
                    "error event does not read back: \(e.event) -> \(reply ?? "nil")")
            case .request(let request):
                fuzzRequire(
                    request.name == NodeCommandLine.name(of: request.command),
                    "command \(request.command) parsed from cmd \(request.name.debugDescription)")
                let written = NodeCommandLine.encode(request)
                guard case .request(let again) = NodeCommandLine.parse(written) else {
                    fuzzRequire(false, "written command does not parse: \(written)"); continue
                }
                fuzzRequire(again == request, "command changed through its line: \(request) -> \(written) -> \(again)")
                guard case .request(let third) = NodeCommandLine.parse(NodeCommandLine.encode(again)) else {
                    fuzzRequire(false, "rewritten command does not parse: \(NodeCommandLine.encode(again))"); continue
                }
                fuzzRequire(third == again, "command line is not stable: \(again) -> \(third)")
            }
            nodeEventLine(line)
        }
    }

    /// `line` read as a revue-node event: no crash; an event read round-trips through its line,
    /// and that line is a fixed point. An event whose number JSON cannot write (only an `rtt`
    /// read as infinity) has no line and is left there.
    static func nodeEventLine(_ line: String) {
        guard let event = try? NodeEvent(line: line), let written = event.line else { return }
        guard let again = try? NodeEvent(line: written) else {
            fuzzRequire(false, "written event does not read back: \(event) -> \(written)"); return
        }
        fuzzRequire(again == event, "event changed through its line: \(event) -> \(written) -> \(again)")
        fuzzRequire(again.line == written, "event line is not stable: \(written) -> \(again.line ?? "nil")")
    }
}
