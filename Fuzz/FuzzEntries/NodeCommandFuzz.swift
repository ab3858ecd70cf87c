import RevueNodeProtocol

extension FuzzEntries {
    /// revue-node command lines (`NodeCommandLine.parse`, RevueNodeProtocol): any line gives a blank,
    /// a typed command or an error event, never a crash. A parsed command, written back with
    /// `NodeCommandLine.encode`, parses to the same request, and so does the next write and parse.
    /// An error's event always names an error.
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
                    !e.error.isEmpty && e.event["event"] == "error",
                    "error without a name for \(line.debugDescription)")
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
        }
    }
}
