// HTTP/1.1 message framing (RFC 9112) for the Janus client and the `revue-media webrtc` server:
// the start line and header fields, then the body by Content-Length, by the chunked transfer
// coding, or (responses only) up to the end of the connection. The bytes come from a peer we do
// not trust, so every length is checked against a limit before it is used, every sum and product
// of lengths is overflow-checked, and every failure is a typed `HTTPMessageError`; no input traps.

/// Why bytes are not an acceptable HTTP/1.1 message. Thread rule: a value type. Cost: none.
package enum HTTPMessageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The start line and header fields (or a chunked body's trailer section) exceed the limit
    /// (bytes).
    case headTooLarge(limit: Int)
    /// More header (or trailer) fields than the limit allows.
    case tooManyFields(limit: Int)
    /// The status line or request line is not HTTP/1.x grammar (the line's start).
    case malformedStartLine(String)
    /// A header or trailer line is not `name: value`, or holds a byte no field may hold (what).
    case malformedField(String)
    /// A line ended in a bare LF or a CR not followed by LF.
    case badLineEnding
    /// A Content-Length that is not a decimal number of bytes, or does not fit an `Int` (the value).
    case badContentLength(String)
    /// Content-Length fields that disagree.
    case conflictingContentLength
    /// A request with both Transfer-Encoding and Content-Length (RFC 9112 §6.3: a smuggling risk).
    case conflictingFraming
    /// A transfer coding this codec does not decode (the field's value).
    case unsupportedTransferCoding(String)
    /// A chunk size that is not hexadecimal digits (the line's start).
    case badChunkSize(String)
    /// A chunk size beyond what an `Int` holds.
    case chunkSizeOverflow
    /// A chunk's data is not followed by CRLF, or a chunk-size line is longer than the limit.
    case malformedChunk(String)
    /// The body (declared or received) exceeds the limit (bytes).
    case bodyTooLarge(limit: Int)
    /// The connection ended before the message did (where).
    case truncated(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .headTooLarge(let limit): "head larger than \(limit) bytes"
        case .tooManyFields(let limit): "more than \(limit) header fields"
        case .malformedStartLine(let s): "malformed start line '\(s)'"
        case .malformedField(let s): "malformed header field: \(s)"
        case .badLineEnding: "a line not ended by CRLF"
        case .badContentLength(let s): "bad Content-Length '\(s)'"
        case .conflictingContentLength: "Content-Length fields that disagree"
        case .conflictingFraming: "both Transfer-Encoding and Content-Length"
        case .unsupportedTransferCoding(let s): "unsupported Transfer-Encoding '\(s)'"
        case .badChunkSize(let s): "bad chunk size '\(s)'"
        case .chunkSizeOverflow: "chunk size overflows"
        case .malformedChunk(let s): "malformed chunk: \(s)"
        case .bodyTooLarge(let limit): "body larger than \(limit) bytes"
        case .truncated(let s): "the connection ended \(s)"
        }
    }
}

/// The bounds a decoder holds a message to. Thread rule: a value type. Cost: none.
package struct HTTPMessageLimits: Hashable, Sendable {
    /// Start line plus header fields, CRLFs included (also the bound on a trailer section).
    package var headBytes = 16 * 1024
    /// Header fields (also the bound on trailer fields).
    package var fieldCount = 100
    /// The decoded body.
    package var bodyBytes = 1 << 20
    /// One chunk-size line, chunk extensions included.
    package var chunkLineBytes = 1024

    /// The defaults: 16 KiB of head, 100 fields, 1 MiB of body, 1 KiB per chunk-size line.
    package init() {}

    /// Chosen limits. Cost: none.
    package init(headBytes: Int, fieldCount: Int, bodyBytes: Int, chunkLineBytes: Int = 1024) {
        self.headBytes = headBytes
        self.fieldCount = fieldCount
        self.bodyBytes = bodyBytes
        self.chunkLineBytes = chunkLineBytes
    }
}

/// One header field as received: the name in lower case, the value without surrounding
/// whitespace. Thread rule: a value type. Cost: none.
package struct HTTPField: Hashable, Sendable {
    /// The field name, lower-cased (names are case-insensitive).
    package var name: String
    /// The field value, leading and trailing spaces and tabs removed.
    package var value: String
}

/// A parsed start line and header section. Thread rule: a value type. Cost: none.
package struct HTTPHead: Hashable, Sendable {
    /// What the start line says.
    package enum StartLine: Hashable, Sendable {
        /// A status line: the minor version (`HTTP/1.x`), the status code and the reason phrase.
        case status(minorVersion: Int, code: Int, reason: String)
        /// A request line: the method token, the request target and the minor version.
        case request(method: String, target: String, minorVersion: Int)
    }

    /// The start line.
    package var startLine: StartLine
    /// The header fields in the order received.
    package var fields: [HTTPField]

    /// The last value of the field called `name` (any case), nil when absent. Cost: a scan.
    package func field(_ name: String) -> String? {
        let lower = name.lowercased()
        return fields.last { $0.name == lower }?.value
    }

    /// Every value of the field called `name` (any case), in order. Cost: a scan.
    package func values(_ name: String) -> [String] {
        let lower = name.lowercased()
        return fields.filter { $0.name == lower }.map(\.value)
    }
}

/// A complete message: its head and its body, decoded from its transfer coding.
/// Thread rule: a value type. Cost: none.
package struct HTTPMessage: Hashable, Sendable {
    /// The start line and header fields (of the final response, after any 1xx).
    package var head: HTTPHead
    /// The body.
    package var body: [UInt8]
}

/// Decodes one HTTP/1.1 message from bytes handed over as they arrive.
///
/// `append` returns the message once it is complete (later bytes are ignored: one message per
/// connection) and throws at the first byte that breaks the grammar or a limit, without waiting for
/// more; `finish` is called when the connection ends (a response without a length ends there).
/// Interim 1xx responses (other than 101) are skipped. Thread rule: a value type, one owner.
/// Cost: linear in the bytes appended (each byte is examined a bounded number of times); holds the
/// undecoded bytes plus the decoded body.
package struct HTTPMessageDecoder: Sendable {
    /// What is expected: a request, or the response to a request with `method` (a response to
    /// HEAD has no body).
    package enum Kind: Hashable, Sendable {
        /// A request (a server's side).
        case request
        /// A response to a request with this method (a client's side).
        case response(toMethod: String)
    }

    /// How the body is delimited.
    private enum Framing: Hashable, Sendable {
        case none
        case length(Int)
        case chunked
        case untilClose
    }

    /// Where the chunked decoder is.
    private enum ChunkState: Hashable, Sendable {
        case sizeLine
        case data(Int)
        case dataEnd
        case trailers(bytes: Int, fields: Int)
        case done
    }

    /// The limits this decoder holds the message to.
    package let limits: HTTPMessageLimits
    /// What is expected.
    package let kind: Kind
    /// The head, once it has been received (before the body is complete). Cost: none.
    package private(set) var head: HTTPHead?
    /// The complete message, once received.
    package private(set) var message: HTTPMessage?

    private var buffer: [UInt8] = []
    /// Where the unparsed bytes of `buffer` start.
    private var position = 0
    /// How far the search for the end of the head has got (from `position`).
    private var scanned = 0
    private var framing = Framing.none
    private var chunk = ChunkState.sizeLine
    /// How far the search for the end of the current chunk-size or trailer line has got.
    private var lineScanned = 0
    private var body: [UInt8] = []

    /// A decoder for one message of `kind` within `limits`. Cost: none.
    package init(_ kind: Kind, limits: HTTPMessageLimits = HTTPMessageLimits()) {
        self.kind = kind
        self.limits = limits
    }

    /// Takes the next bytes; returns the message when it is complete, nil while more is needed.
    /// Throws at the first violation. Cost: linear in `bytes`.
    @discardableResult
    package mutating func append(_ bytes: some Collection<UInt8>) throws(HTTPMessageError) -> HTTPMessage? {
        if let message { return message }
        buffer.append(contentsOf: bytes)
        try advance()
        return message
    }

    /// The connection has ended: returns the message (a response delimited by the end of the
    /// connection ends here) or throws `.truncated` when it is incomplete. Cost: a copy of the body.
    package mutating func finish() throws(HTTPMessageError) -> HTTPMessage {
        if let message { return message }
        guard let head else {
            throw .truncated(buffer.count == position ? "before a message started" : "inside the head")
        }
        switch framing {
        case .untilClose:
            let done = HTTPMessage(head: head, body: body)
            message = done
            return done
        case .length(let n): throw .truncated("after \(body.count) of \(n) body bytes")
        case .chunked: throw .truncated("inside the chunked body")
        case .none: throw .truncated("inside the head")
        }
    }

    /// Parses whatever the buffer allows.
    private mutating func advance() throws(HTTPMessageError) {
        while message == nil {
            if head == nil {
                guard try parseHead() else { return }
                continue
            }
            switch framing {
            case .none:
                complete()
            case .length(let n):
                let take = min(n - body.count, buffer.count - position)
                body.append(contentsOf: buffer[position..<(position + take)])
                position += take
                if body.count == n { complete() } else { compact(); return }
            case .untilClose:
                let take = buffer.count - position
                guard take <= limits.bodyBytes - body.count else { throw .bodyTooLarge(limit: limits.bodyBytes) }
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                compact()
                return
            case .chunked:
                guard try decodeChunks() else { compact(); return }
                complete()
            }
        }
    }

    private mutating func complete() {
        if let head { message = HTTPMessage(head: head, body: body) }
        buffer = []
        position = 0
    }

    /// Drops consumed bytes once they are most of the buffer (amortised linear).
    private mutating func compact() {
        if position > 4096 && position * 2 > buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
    }

    // MARK: The head

    /// Looks for the end of the head and parses it: false while incomplete.
    private mutating func parseHead() throws(HTTPMessageError) -> Bool {
        // Find CRLF CRLF, checking line endings on the way (an empty line before the start line
        // is not skipped: it is a malformed start line).
        var i = position + scanned
        var end: Int?
        while i < buffer.count {
            let byte = buffer[i]
            if byte == 10 {
                guard i > position, buffer[i - 1] == 13 else { throw .badLineEnding }
                if i - position >= 3, buffer[i - 2] == 10 {
                    end = i + 1
                    break
                }
            } else if i > position, buffer[i - 1] == 13 {
                throw .badLineEnding
            }
            i += 1
            if i - position > limits.headBytes { throw .headTooLarge(limit: limits.headBytes) }
        }
        guard let end else {
            scanned = buffer.count - position
            return false
        }
        if end - position > limits.headBytes { throw .headTooLarge(limit: limits.headBytes) }
        let lines = Self.lines(buffer[position..<(end - 4)])
        let parsed = try parseHeadLines(lines)
        position = end
        scanned = 0
        if case .status(_, let code, _) = parsed.startLine, (100...199).contains(code), code != 101 {
            return true  // An interim response: the final one follows.
        }
        head = parsed
        framing = try Self.framing(of: parsed, kind: kind, limits: limits)
        return true
    }

    /// Splits a head (without its final CRLF CRLF) at CRLF.
    private static func lines(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == 13 {
                out.append(bytes[start..<i])
                i += 2
                start = i
            } else {
                i += 1
            }
        }
        out.append(bytes[start..<bytes.endIndex])
        return out
    }

    private func parseHeadLines(_ lines: [ArraySlice<UInt8>]) throws(HTTPMessageError) -> HTTPHead {
        let first = lines[0]
        let startLine: HTTPHead.StartLine
        switch kind {
        case .response: startLine = try Self.statusLine(first)
        case .request: startLine = try Self.requestLine(first)
        }
        guard lines.count - 1 <= limits.fieldCount else { throw .tooManyFields(limit: limits.fieldCount) }
        var fields: [HTTPField] = []
        fields.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() { fields.append(try Self.field(line)) }
        return HTTPHead(startLine: startLine, fields: fields)
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(80), as: UTF8.self)
    }

    /// `HTTP/1.x SP 3DIGIT SP reason` (the reason may be empty or absent).
    private static func statusLine(_ line: ArraySlice<UInt8>) throws(HTTPMessageError) -> HTTPHead.StartLine {
        let b = Array(line)
        guard b.count >= 12, let minor = version(b[0..<8]), b[8] == 32,
            b[9...11].allSatisfy({ $0 >= 48 && $0 <= 57 }), b.count == 12 || b[12] == 32,
            b[9] >= 49, b[9] <= 53
        else { throw .malformedStartLine(text(line)) }
        let code = Int(b[9] - 48) * 100 + Int(b[10] - 48) * 10 + Int(b[11] - 48)
        let reasonBytes = b.count > 13 ? b[13...] : []
        guard reasonBytes.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .malformedStartLine(text(line)) }
        return .status(minorVersion: minor, code: code, reason: String(decoding: reasonBytes, as: UTF8.self))
    }

    /// `method SP request-target SP HTTP/1.x`.
    private static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPMessageError) -> HTTPHead.StartLine {
        let parts = line.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isHTTPTokenByte), !parts[1].isEmpty,
            parts[1].allSatisfy({ $0 > 32 && $0 < 127 }), let minor = version(parts[2])
        else { throw .malformedStartLine(text(line)) }
        return .request(
            method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
            minorVersion: minor)
    }

    /// The minor version of `HTTP/1.x`, nil for anything else.
    private static func version(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count == 8, bytes.starts(with: Array("HTTP/1.".utf8)), let last = bytes.last, last >= 48, last <= 57
        else { return nil }
        return Int(last - 48)
    }

    /// `name ":" OWS value OWS`; no obsolete line folding, no control bytes but HTAB in the value.
    private static func field(_ line: ArraySlice<UInt8>) throws(HTTPMessageError) -> HTTPField {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
            line[..<colon].allSatisfy(isHTTPTokenByte)
        else { throw .malformedField("'\(text(line))'") }
        var value = line[(colon + 1)...]
        guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
            throw .malformedField("a control byte in '\(text(line[..<colon]))'")
        }
        while let f = value.first, f == 32 || f == 9 { value = value.dropFirst() }
        while let l = value.last, l == 32 || l == 9 { value = value.dropLast() }
        return HTTPField(
            name: String(decoding: line[..<colon], as: UTF8.self).lowercased(), value: String(decoding: value, as: UTF8.self))
    }

    /// How the body of a message with `head` is delimited (RFC 9112 §6.3).
    private static func framing(of head: HTTPHead, kind: Kind, limits: HTTPMessageLimits) throws(HTTPMessageError)
        -> Framing
    {
        if case .response(let method) = kind, case .status(_, let code, _) = head.startLine {
            if method == "HEAD" || code == 204 || code == 304 || (100...199).contains(code) { return .none }
        }
        let codings = head.values("transfer-encoding")
        let lengths = head.values("content-length")
        if !codings.isEmpty {
            if kind == .request && !lengths.isEmpty { throw .conflictingFraming }
            let list = codings.joined(separator: ",").split(separator: ",").map {
                $0.trimmingSpacesAndTabs.lowercased()
            }
            if list == ["chunked"] { return .chunked }
            // Other codings (gzip, ...) are not decoded; a response with them is refused too, since
            // the JSON it carries would be unreadable.
            throw .unsupportedTransferCoding(codings.joined(separator: ", "))
        }
        if !lengths.isEmpty {
            var length: Int?
            for text in lengths {
                for item in text.split(separator: ",", omittingEmptySubsequences: false) {
                    let n = try contentLength(item.trimmingSpacesAndTabs, limits: limits)
                    if let length, length != n { throw .conflictingContentLength }
                    length = n
                }
            }
            if let length { return length == 0 ? .none : .length(length) }
        }
        return kind == .request ? .none : .untilClose
    }

    /// 1*DIGIT, overflow-checked, then checked against the body limit.
    private static func contentLength(_ text: String, limits: HTTPMessageLimits) throws(HTTPMessageError) -> Int {
        guard !text.isEmpty else { throw .badContentLength(text) }
        var n = 0
        for b in text.utf8 {
            guard b >= 48 && b <= 57 else { throw .badContentLength(String(text.prefix(40))) }
            let (times10, o1) = n.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int(b - 48))
            guard !o1 && !o2 else { throw .badContentLength(String(text.prefix(40))) }
            n = sum
        }
        guard n <= limits.bodyBytes else { throw .bodyTooLarge(limit: limits.bodyBytes) }
        return n
    }

    // MARK: The chunked body

    /// Decodes chunks from `position`: true once the last chunk and the trailers are in.
    private mutating func decodeChunks() throws(HTTPMessageError) -> Bool {
        while true {
            switch chunk {
            case .sizeLine:
                guard let lineEnd = try lineEnd(limit: limits.chunkLineBytes, what: "chunk-size line") else { return false }
                let size = try Self.chunkSize(buffer[position..<lineEnd])
                position = lineEnd + 2
                if size == 0 {
                    chunk = .trailers(bytes: 0, fields: 0)
                } else {
                    guard size <= limits.bodyBytes - body.count else { throw .bodyTooLarge(limit: limits.bodyBytes) }
                    chunk = .data(size)
                }
            case .data(let left):
                let take = min(left, buffer.count - position)
                body.append(contentsOf: buffer[position..<(position + take)])
                position += take
                if take < left {
                    chunk = .data(left - take)
                    return false
                }
                chunk = .dataEnd
            case .dataEnd:
                guard buffer.count - position >= 2 else { return false }
                guard buffer[position] == 13, buffer[position + 1] == 10 else {
                    throw .malformedChunk("chunk data not followed by CRLF")
                }
                position += 2
                chunk = .sizeLine
            case .trailers(let bytes, let fields):
                let room = limits.headBytes - bytes
                guard let lineEnd = try lineEnd(limit: room, what: "trailer section") else { return false }
                let length = lineEnd - position
                if length == 0 {
                    position += 2
                    chunk = .done
                    return true
                }
                guard fields < limits.fieldCount else { throw .tooManyFields(limit: limits.fieldCount) }
                _ = try Self.field(buffer[position..<lineEnd])  // Checked, then ignored.
                position = lineEnd + 2
                chunk = .trailers(bytes: bytes + length + 2, fields: fields + 1)
            case .done:
                return true
            }
        }
    }

    /// The index of the CR of the CRLF ending the line at `position`, nil while it has not all
    /// arrived. Throws when the line holds a bare CR or LF or grows past `limit` bytes.
    private mutating func lineEnd(limit: Int, what: String) throws(HTTPMessageError) -> Int? {
        var i = position + lineScanned
        while i < buffer.count {
            if i - position > limit {
                if what == "trailer section" { throw .headTooLarge(limit: limits.headBytes) }
                throw .malformedChunk("\(what) longer than \(limit) bytes")
            }
            switch buffer[i] {
            case 13:
                guard i + 1 < buffer.count else {
                    lineScanned = i - position
                    return nil
                }
                guard buffer[i + 1] == 10 else { throw .badLineEnding }
                lineScanned = 0
                return i
            case 10: throw .badLineEnding
            default: i += 1
            }
        }
        if i - position > limit {
            if what == "trailer section" { throw .headTooLarge(limit: limits.headBytes) }
            throw .malformedChunk("\(what) longer than \(limit) bytes")
        }
        lineScanned = i - position
        return nil
    }

    /// `1*HEXDIG [BWS ; chunk-ext]`: the size, overflow-checked; extensions are ignored.
    private static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPMessageError) -> Int {
        var size = 0
        var digits = 0
        var i = line.startIndex
        while i < line.endIndex, let d = hexValue(line[i]) {
            let (times16, o1) = size.multipliedReportingOverflow(by: 16)
            let (sum, o2) = times16.addingReportingOverflow(d)
            guard !o1 && !o2 else { throw .chunkSizeOverflow }
            size = sum
            digits += 1
            i += 1
        }
        guard digits > 0 else { throw .badChunkSize(text(line)) }
        while i < line.endIndex, line[i] == 32 || line[i] == 9 { i += 1 }
        guard i == line.endIndex || line[i] == UInt8(ascii: ";") else { throw .badChunkSize(text(line)) }
        guard line[i...].allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .badChunkSize(text(line)) }
        return size
    }

    private static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 48...57: Int(b - 48)
        case 65...70: Int(b - 55)
        case 97...102: Int(b - 87)
        default: nil
        }
    }
}

extension HTTPMessageDecoder {
    /// Decodes one message from all of `bytes` at once: nil while incomplete, unless `complete`
    /// (the connection has ended), when an incomplete message throws `.truncated`.
    /// Thread rule: any thread. Cost: linear in `bytes`.
    package static func decode(
        _ bytes: some Collection<UInt8>, as kind: Kind, limits: HTTPMessageLimits = HTTPMessageLimits(), complete: Bool
    ) throws(HTTPMessageError) -> HTTPMessage? {
        var decoder = HTTPMessageDecoder(kind, limits: limits)
        if let message = try decoder.append(bytes) { return message }
        return complete ? try decoder.finish() : nil
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's OWS).
    fileprivate var trimmingSpacesAndTabs: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// RFC 9110 §5.6.2 tchar.
private func isHTTPTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case 48...57, 65...90, 97...122: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
        UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        true
    default: false
    }
}

extension HTTPHead {
    /// A request head: `method target HTTP/1.1` and `fields` (names as given).
    package static func request(_ method: String, _ target: String, _ fields: [(String, String)]) -> HTTPHead {
        HTTPHead(
            startLine: .request(method: method, target: target, minorVersion: 1),
            fields: fields.map { HTTPField(name: $0.0, value: $0.1) })
    }

    /// A response head: `HTTP/1.1 status reason` and `fields` (names as given).
    package static func response(_ status: Int, reason: String, _ fields: [(String, String)]) -> HTTPHead {
        HTTPHead(
            startLine: .status(minorVersion: 1, code: status, reason: reason),
            fields: fields.map { HTTPField(name: $0.0, value: $0.1) })
    }

    /// The head as it goes on the wire: the start line, each field, and the empty line. Throws
    /// `.malformedStartLine` or `.malformedField` instead of writing a method or field name that
    /// is not a token, a target with a space or control byte, a status outside 100...999, or a
    /// reason or value with a control byte other than HTAB: a CR or LF taken from a caller's
    /// string (a token, a path) would otherwise end the field and start another one.
    /// Thread rule: a value type. Cost: one pass over the fields, one array.
    package func encoded() throws(HTTPMessageError) -> [UInt8] {
        func text(_ s: String) -> Bool { s.utf8.allSatisfy { $0 == 9 || ($0 >= 32 && $0 != 127) } }
        var out = [UInt8]()
        switch startLine {
        case .request(let method, let target, let minor):
            guard !method.isEmpty, method.utf8.allSatisfy(isHTTPTokenByte), !target.isEmpty,
                target.utf8.allSatisfy({ $0 > 32 && $0 != 127 }), (0...9).contains(minor)
            else { throw .malformedStartLine("\(method) \(target)") }
            out += Array("\(method) \(target) HTTP/1.\(minor)\r\n".utf8)
        case .status(let minor, let code, let reason):
            guard (100...999).contains(code), text(reason), (0...9).contains(minor) else {
                throw .malformedStartLine("\(code) \(reason)")
            }
            out += Array("HTTP/1.\(minor) \(code) \(reason)\r\n".utf8)
        }
        for f in fields {
            guard !f.name.isEmpty, f.name.utf8.allSatisfy(isHTTPTokenByte) else { throw .malformedField("name '\(f.name)'") }
            guard text(f.value) else { throw .malformedField("a control byte in the value of \(f.name)") }
            out += Array("\(f.name): \(f.value)\r\n".utf8)
        }
        out += [13, 10]
        return out
    }
}
