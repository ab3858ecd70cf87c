// HTTPMessageDecoder on good and hostile bytes: responses and requests by Content-Length, chunked
// and to the end of the connection, fed whole and one byte at a time; then every kind of broken or
// oversize input, each of which must end in its typed error (no trap, no overflow).
import Foundation
import FuzzEntries
import MediaCore
import Testing

struct HTTPMessageCodecTests {
    static func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
    static let small = HTTPMessageLimits(headBytes: 256, fieldCount: 8, bodyBytes: 1000, chunkLineBytes: 64)

    /// Decodes `text` as a response (whole, at the end of the connection) and returns the error.
    static func responseError(_ text: String, limits: HTTPMessageLimits = small, complete: Bool = true) -> HTTPMessageError? {
        do {
            _ = try HTTPMessageDecoder.decode(bytes(text), as: .response(toMethod: "GET"), limits: limits, complete: complete)
            return nil
        } catch {
            return error
        }
    }

    /// The same input one byte at a time must give the same result as all at once.
    static func byteByByte(_ input: [UInt8], _ kind: HTTPMessageDecoder.Kind) -> Result<HTTPMessage, HTTPMessageError> {
        var decoder = HTTPMessageDecoder(kind, limits: small)
        do {
            for b in input { if let m = try decoder.append([b]) { return .success(m) } }
            return .success(try decoder.finish())
        } catch {
            return .failure(error)
        }
    }

    @Test func goodResponsesDecodeWholeAndByteByByte() throws {
        let cases: [(String, Int, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello", 200, "hello"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\ncontent-length: 5\r\n\r\nhelloEXTRA", 200, "hello"),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=1;y=\"z\"\r\ndefg\r\nA \r\n0123456789\r\n0\r\n\r\n",
                200, "abcdefg0123456789"
            ),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0;ext\r\nX-Trailer: 1\r\nY: 2\r\n\r\n", 200, "hi"),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 201, "ok"),
            ("HTTP/1.0 404 Not Found\r\n\r\nnothing here", 404, "nothing here"),
            ("HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n", 204, ""),
            ("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200, ""),
        ]
        for (text, status, body) in cases {
            let whole = try #require(
                try HTTPMessageDecoder.decode(Self.bytes(text), as: .response(toMethod: "GET"), complete: true))
            #expect(
                whole.head.startLine
                    == .status(
                        minorVersion: text.hasPrefix("HTTP/1.0") ? 0 : 1, code: status, reason: whole.head.startLine.reason))
            #expect(whole.body == Self.bytes(body), "\(text)")
            #expect(try Self.byteByByte(Self.bytes(text), .response(toMethod: "GET")).get() == whole)
        }
        // Incomplete: nil before the end of the connection.
        #expect(
            try HTTPMessageDecoder.decode(
                Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell"), as: .response(toMethod: "GET"), complete: false)
                == nil)
        // A response to HEAD has no body, whatever its Content-Length says.
        let head = try #require(
            try HTTPMessageDecoder.decode(
                Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"), as: .response(toMethod: "HEAD"), complete: false))
        #expect(head.body.isEmpty)
    }

    @Test func requestsDecode() throws {
        let post = Self.bytes("POST /session?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nv=0\n")
        let m = try #require(try HTTPMessageDecoder.decode(post, as: .request, complete: false))
        #expect(m.head.startLine == .request(method: "POST", target: "/session?x=1", minorVersion: 1))
        #expect(m.head.field("HOST") == "a" && m.body == Self.bytes("v=0\n"))
        #expect(try Self.byteByByte(post, .request).get() == m)
        let get = try #require(try HTTPMessageDecoder.decode(Self.bytes("GET / HTTP/1.0\r\n\r\n"), as: .request, complete: false))
        #expect(get.body.isEmpty)
        let chunked = Self.bytes("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n")
        #expect(try HTTPMessageDecoder.decode(chunked, as: .request, complete: false)?.body == Self.bytes("a"))
    }

    @Test func hostileChunkSizesAreTypedErrors() {
        let prefix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let cases: [(String, HTTPMessageError)] = [
            ("-1\r\nx\r\n0\r\n\r\n", .badChunkSize("-1")),
            ("\r\n", .badChunkSize("")),
            (" 5\r\nhello\r\n0\r\n\r\n", .badChunkSize(" 5")),
            ("0x5\r\nhello\r\n0\r\n\r\n", .badChunkSize("0x5")),
            ("zz\r\n", .badChunkSize("zz")),
            ("5 x\r\nhello\r\n", .badChunkSize("5 x")),
            ("FFFFFFFFFFFFFFFFFF\r\n", .chunkSizeOverflow),
            ("10000000000000000\r\n", .chunkSizeOverflow),
            ("8000000000000000\r\n", .chunkSizeOverflow),  // 0x7FFFFFFFFFFFFFFF + 1
            ("7FFFFFFFFFFFFFFF\r\n", .bodyTooLarge(limit: 1000)),
            ("3E9\r\n", .bodyTooLarge(limit: 1000)),  // 1001
            ("3E8\r\n" + String(repeating: "a", count: 1000) + "\r\n1\r\n", .bodyTooLarge(limit: 1000)),
            ("5\r\nhelloXX0\r\n\r\n", .malformedChunk("chunk data not followed by CRLF")),
            ("5;" + String(repeating: "e", count: 100) + "\r\n", .malformedChunk("chunk-size line longer than 64 bytes")),
            ("5\nhello\r\n", .badLineEnding),
            ("5\rhello\r\n", .badLineEnding),
            ("5\r\nhello\r\n0\r\n", .truncated("inside the chunked body")),
            ("5\r\nhel", .truncated("inside the chunked body")),
            ("0\r\nbad trailer\r\n\r\n", .malformedField("'bad trailer'")),
            ("0\r\n" + String(repeating: "T: 1\r\n", count: 9) + "\r\n", .tooManyFields(limit: 8)),
            ("0\r\nT: " + String(repeating: "t", count: 300) + "\r\n\r\n", .headTooLarge(limit: 256)),
        ]
        for (body, expected) in cases {
            #expect(Self.responseError(prefix + body) == expected, "\(body.prefix(40))")
            #expect(Self.byteByByte(Self.bytes(prefix + body), .response(toMethod: "GET")) == .failure(expected))
        }
    }

    @Test func hostileLengthsAreTypedErrors() {
        func withLength(_ fields: String) -> String { "HTTP/1.1 200 OK\r\n\(fields)\r\n\r\nbody" }
        let cases: [(String, HTTPMessageError)] = [
            (withLength("Content-Length: 99999999999999999999999"), .badContentLength("99999999999999999999999")),
            (withLength("Content-Length: 9223372036854775808"), .badContentLength("9223372036854775808")),
            (withLength("Content-Length: 9223372036854775807"), .bodyTooLarge(limit: 1000)),
            (withLength("Content-Length: 1001"), .bodyTooLarge(limit: 1000)),
            (withLength("Content-Length: -1"), .badContentLength("-1")),
            (withLength("Content-Length: +4"), .badContentLength("+4")),
            (withLength("Content-Length: 0x10"), .badContentLength("0x10")),
            (withLength("Content-Length:"), .badContentLength("")),
            (withLength("Content-Length: 4\r\nContent-Length: 5"), .conflictingContentLength),
            (withLength("Content-Length: 4, 40"), .conflictingContentLength),
            (withLength("Content-Length: 40"), .truncated("after 4 of 40 body bytes")),
            (withLength("Transfer-Encoding: gzip"), .unsupportedTransferCoding("gzip")),
            (withLength("Transfer-Encoding: chunked, chunked"), .unsupportedTransferCoding("chunked, chunked")),
            ("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "b", count: 1001), .bodyTooLarge(limit: 1000)),
        ]
        for (text, expected) in cases {
            #expect(Self.responseError(text) == expected, "\(text.prefix(60))")
        }
        // A request may not carry both framings.
        #expect(throws: HTTPMessageError.conflictingFraming) {
            try HTTPMessageDecoder.decode(
                Self.bytes("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), as: .request,
                complete: false)
        }
    }

    @Test func brokenHeadsAreTypedErrors() {
        let cases: [(String, HTTPMessageError)] = [
            ("", .truncated("before a message started")),
            ("HTTP/1.1 200 OK\r\nContent-Len", .truncated("inside the head")),
            ("HTTP/1.1 200 OK\r\n", .truncated("inside the head")),
            ("SSH-2.0-OpenSSH_9.6\r\n\r\n", .malformedStartLine("SSH-2.0-OpenSSH_9.6")),
            ("HTTP/1.1 abc OK\r\n\r\n", .malformedStartLine("HTTP/1.1 abc OK")),
            ("HTTP/2 200 OK\r\n\r\n", .malformedStartLine("HTTP/2 200 OK")),
            ("HTTP/1.1 999 Nine\r\n\r\n", .malformedStartLine("HTTP/1.1 999 Nine")),
            ("HTTP/1.1 2000 OK\r\n\r\n", .malformedStartLine("HTTP/1.1 2000 OK")),
            ("\r\nHTTP/1.1 200 OK\r\n\r\n", .malformedStartLine("")),
            ("\u{0}\u{1}\u{2}\u{FF}\r\n\r\n", .malformedStartLine("\u{0}\u{1}\u{2}\u{FF}")),
            ("HTTP/1.1 200 OK\nContent-Length: 0\n\n", .badLineEnding),
            ("HTTP/1.1 200 OK\rContent-Length: 0\r\r", .badLineEnding),
            ("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", .malformedField("'no colon here'")),
            ("HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", .malformedField("'Bad Name: 1'")),
            ("HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", .malformedField("': empty name'")),
            ("HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n", .malformedField("' folded'")),
            ("HTTP/1.1 200 OK\r\nA: nul\u{0}byte\r\n\r\n", .malformedField("a control byte in 'A'")),
            ("HTTP/1.1 200 OK\r\n" + String(repeating: "X: 1\r\n", count: 9) + "\r\n", .tooManyFields(limit: 8)),
            ("HTTP/1.1 200 OK\r\nX: " + String(repeating: "x", count: 300) + "\r\n\r\n", .headTooLarge(limit: 256)),
        ]
        for (text, expected) in cases {
            #expect(Self.responseError(text) == expected, "\(text.prefix(60).debugDescription)")
            #expect(Self.byteByByte(Self.bytes(text), .response(toMethod: "GET")) == .failure(expected))
        }
        let badRequests = ["GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1 extra\r\n\r\n"]
        for text in badRequests {
            #expect(throws: HTTPMessageError.malformedStartLine(String(text.prefix(while: { $0 != "\r\n" })))) {
                try HTTPMessageDecoder.decode(Self.bytes(text), as: .request, complete: true)
            }
        }
    }

    @Test func endlessHeadsStopAtTheLimitAsTheyArrive() {
        // Headers that never end, fed the way a socket hands them over: the decoder throws as soon
        // as the head passes the limit, holding no more than that.
        var decoder = HTTPMessageDecoder(.response(toMethod: "GET"), limits: Self.small)
        var fed = 0
        var error: HTTPMessageError?
        do {
            try decoder.append(Self.bytes("HTTP/1.1 200 OK\r\n"))
            while fed < 100_000 {
                try decoder.append(Self.bytes("X-Again: and again\r\n"))
                fed += 20
            }
        } catch let e {
            error = e
        }
        #expect(error == .tooManyFields(limit: 8) || error == .headTooLarge(limit: 256))
        #expect(fed <= 256)
        // One endless line without any CRLF.
        var line = HTTPMessageDecoder(.request, limits: Self.small)
        #expect(throws: HTTPMessageError.headTooLarge(limit: 256)) {
            for _ in 0..<100 { try line.append([UInt8](repeating: 0x41, count: 10)) }
        }
        // An endless body to the end of the connection.
        var body = HTTPMessageDecoder(.response(toMethod: "GET"), limits: Self.small)
        #expect(throws: HTTPMessageError.bodyTooLarge(limit: 1000)) {
            try body.append(Self.bytes("HTTP/1.1 200 OK\r\n\r\n"))
            for _ in 0..<1000 { try body.append([UInt8](repeating: 0x62, count: 100)) }
        }
    }

    @Test func afterAnErrorOrAMessageNothingTraps() throws {
        // A complete message ignores what follows; the decoder keeps answering the same message.
        var decoder = HTTPMessageDecoder(.response(toMethod: "GET"))
        let m = try #require(try decoder.append(Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab")))
        #expect(try decoder.append(Self.bytes("-1\r\n")) == m)
        #expect(try decoder.finish() == m)
    }
    /// What the clients and the server write: the exact bytes, read back by the decoder; and
    /// every string that would end a line early (a token or path with CR or LF in it, taken from
    /// a caller) is refused with a typed error instead of starting a field of its own.
    @Test func headsAreWrittenExactlyAndWhatWouldInjectAFieldIsRefused() throws {
        let request = try HTTPHead.request("POST", "/janus/7", [("Host", "sfu:8088"), ("Content-Length", "2")]).encoded()
        #expect(
            String(decoding: request, as: UTF8.self) == "POST /janus/7 HTTP/1.1\r\nHost: sfu:8088\r\nContent-Length: 2\r\n\r\n")
        let decoded = try #require(try HTTPMessageDecoder.decode(request + Self.bytes("{}"), as: .request, complete: true))
        #expect(decoded.head.startLine == .request(method: "POST", target: "/janus/7", minorVersion: 1))
        #expect(decoded.head.field("host") == "sfu:8088" && decoded.body == Self.bytes("{}"))
        let response = try HTTPHead.response(201, reason: "Created", [("Location", "/r/1"), ("X-Note", "a\tb é")]).encoded()
        #expect(String(decoding: response, as: UTF8.self) == "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nX-Note: a\tb é\r\n\r\n")

        let refused: [(String, HTTPHead)] = [
            ("a CRLF in a value", .request("GET", "/", [("Authorization", "Bearer t\r\nX-Injected: 1")])),
            ("a bare LF in a value", .request("GET", "/", [("Authorization", "Bearer t\nX-Injected: 1")])),
            ("a NUL in a value", .request("GET", "/", [("X-A", "a\u{0}b")])),
            ("a space in a name", .request("GET", "/", [("X A", "b")])),
            ("an empty name", .request("GET", "/", [("", "b")])),
            ("a colon in a name", .request("GET", "/", [("X:A", "b")])),
            ("a space in the method", .request("GE T", "/", [])),
            ("a space in the target", .request("GET", "/a b", [])),
            ("a CRLF in the target", .request("GET", "/a\r\nX-Injected: 1", [])),
            ("an empty target", .request("GET", "", [])),
            ("a status below 100", .response(99, reason: "Low", [])),
            ("a CR in the reason", .response(200, reason: "OK\rX", [])),
        ]
        for (what, head) in refused {
            #expect(throws: HTTPMessageError.self, "\(what)") { try head.encoded() }
        }
    }

    @Test func committedSeedsAreTheFuzzEntrySeeds() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/fuzz-http")
        for (name, bytes) in FuzzEntries.httpSeeds() {
            let file = try Data(contentsOf: dir.appendingPathComponent(name))
            #expect([UInt8](file) == bytes, "\(name)")
        }
    }
}

extension HTTPHead.StartLine {
    /// The reason phrase of a status line ("" for a request line).
    var reason: String {
        if case .status(_, _, let reason) = self { return reason }
        return ""
    }
}
