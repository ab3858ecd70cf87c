import MediaCore

extension FuzzEntries {
    /// HTTP/1.1 framing (`HTTPMessageDecoder`, what the Janus client and the `revue-media webrtc`
    /// server read) on any bytes. Byte 0: bit 0 picks a request or a response (bit 1: to HEAD
    /// rather than GET); bits 2-7 plus one are the size of the pieces the rest is also fed in.
    ///
    /// Properties: decoding never traps; fed whole or in pieces, the input gives the same message or
    /// the same error; a message holds no more fields and body bytes than the limits allow; a
    /// decoded message written again with Content-Length, and again chunked, decodes to the same
    /// head and body.
    /// Thread rule: any thread. Cost: a few decodes of the input.
    @Sendable public static func http(_ data: UnsafeRawBufferPointer) {
        guard let mode = data.first else { return }
        let rest = Array(data[1...])
        let kind: HTTPMessageDecoder.Kind = mode & 1 == 1 ? .request : .response(toMethod: mode & 2 == 0 ? "GET" : "HEAD")
        let limits = HTTPMessageLimits(headBytes: 512, fieldCount: 16, bodyBytes: 2048, chunkLineBytes: 64)
        let whole = httpDecode([rest[...]], kind, limits)
        let step = Int(mode >> 2) + 1
        let pieces = stride(from: 0, to: rest.count, by: step).map { rest[$0..<min($0 + step, rest.count)] }
        fuzzRequire(httpDecode(pieces, kind, limits) == whole, "whole and in pieces of \(step) disagree")
        guard case .success(let message) = whole else { return }
        fuzzRequire(message.head.fields.count <= limits.fieldCount, "more fields than the limit")
        fuzzRequire(message.body.count <= limits.bodyBytes, "a body beyond the limit")
        let canHaveBody: Bool
        if case .status(_, let code, _) = message.head.startLine {
            canHaveBody = mode & 2 == 0 && code != 204 && code != 304 && !(100...199).contains(code)
        } else {
            canHaveBody = true
        }
        guard canHaveBody else { return }
        let framing: Set<String> = ["content-length", "transfer-encoding"]
        let kept = message.head.fields.filter { !framing.contains($0.name) }
        var head = ""
        switch message.head.startLine {
        case .status(let minor, let code, let reason): head = "HTTP/1.\(minor) \(code) \(reason)\r\n"
        case .request(let method, let target, let minor): head = "\(method) \(target) HTTP/1.\(minor)\r\n"
        }
        for field in kept { head += "\(field.name): \(field.value)\r\n" }
        let big = HTTPMessageLimits(headBytes: 1 << 16, fieldCount: 64, bodyBytes: 1 << 16)
        let byLength = Array((head + "Content-Length: \(message.body.count)\r\n\r\n").utf8) + message.body
        var chunked = Array((head + "Transfer-Encoding: chunked\r\n\r\n").utf8)
        var at = 0
        var size = 1
        while at < message.body.count {
            let n = min(size, message.body.count - at)
            chunked += Array((String(n, radix: 16) + (size & 1 == 0 ? ";x=y" : "") + "\r\n").utf8)
            chunked += message.body[at..<(at + n)]
            chunked += [13, 10]
            at += n
            size = size * 3 + 1
        }
        chunked += Array("0\r\nTrailer: t\r\n\r\n".utf8)
        for again in [byLength, chunked] {
            guard case .success(let back) = httpDecode([again[...]], kind, big) else {
                fuzzRequire(false, "a message written again does not decode")
                return
            }
            fuzzRequire(back.head.startLine == message.head.startLine, "start line changed")
            fuzzRequire(back.head.fields.filter { !framing.contains($0.name) } == kept, "fields changed")
            fuzzRequire(back.body == message.body, "body changed")
        }
    }

    /// The seed inputs of fuzz-http: responses by length, chunked with extensions and a trailer,
    /// after an interim response to the end of the connection, with a hostile chunk size, to HEAD;
    /// requests by length and chunked.
    public static func httpSeeds() -> [(name: String, bytes: [UInt8])] {
        let seeds: [(String, UInt8, String)] = [
            (
                "response-length", 0,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"janus\":\"success\",\"id\":1}\n"
            ),
            (
                "response-chunked", 4,
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA \r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
            ),
            (
                "response-interim-to-end", 8,
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 404 Not Found\r\nServer: x\r\n\r\nnothing here"
            ),
            (
                "response-hostile-chunk", 0,
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7FFFFFFFFFFFFFFF\r\n-1\r\n"
            ),
            ("response-head", 2, "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"),
            (
                "request-post", 1,
                "POST /session?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/sdp\r\nContent-Length: 4, 4\r\n\r\nv=0\n"
            ),
            ("request-chunked", 5, "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
        ]
        return seeds.map { ($0.0, [$0.1] + Array($0.2.utf8)) }
    }

    /// Feeds `pieces` one after another, then ends the connection.
    static func httpDecode(
        _ pieces: [ArraySlice<UInt8>], _ kind: HTTPMessageDecoder.Kind, _ limits: HTTPMessageLimits
    ) -> Result<HTTPMessage, HTTPMessageError> {
        var decoder = HTTPMessageDecoder(kind, limits: limits)
        do {
            for piece in pieces { if let m = try decoder.append(piece) { return .success(m) } }
            return .success(try decoder.finish())
        } catch {
            return .failure(error)
        }
    }
}
