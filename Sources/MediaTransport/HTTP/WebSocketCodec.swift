// The WebSocket protocol (RFC 6455) as bytes: the client's opening handshake and its check of the
// server's answer, frames written (masked from a client, unmasked from a server) and frames read
// back into messages (text, binary, ping, pong, close; fragmented messages joined). No socket here:
// the Janus WebSocket transport feeds it what it reads, the fuzz target feeds it anything.
// Every length is checked before it is used: a 64-bit length with its top bit set, a length not
// written in its shortest form, or a message beyond the limit is an error at the frame header,
// before any payload is buffered.
internal import CMediaShims
import MediaBase
import MediaWire

/// Why WebSocket bytes were refused. Thread rule: a value type. Cost: none.
package enum WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server's answer to the opening handshake was not an acceptable upgrade (what was wrong).
    case handshake(String)
    /// A frame set RSV1, RSV2 or RSV3 (no extension is negotiated).
    case reservedBits(UInt8)
    /// A frame's opcode is not one RFC 6455 defines.
    case unknownOpcode(UInt8)
    /// A frame was masked when it must not be (server to client), or not when it must (client to
    /// server).
    case badMasking(masked: Bool)
    /// A control frame (close, ping, pong) was fragmented or longer than 125 bytes.
    case badControlFrame(String)
    /// A length was not written in its shortest form, or a 64-bit length had its top bit set.
    case badLength(String)
    /// A message (all its fragments) would be longer than the limit (bytes).
    case messageTooLarge(limit: Int)
    /// A continuation frame without a message to continue, or a new message before the last one
    /// ended.
    case badFragmentation(String)
    /// A text message or a close reason was not UTF-8.
    case invalidUTF8
    /// A close frame's payload was not a valid status code and reason (what was wrong).
    case badClose(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .handshake(let s): "WebSocket handshake refused: \(s)"
        case .reservedBits(let b): "WebSocket frame with reserved bits \(b)"
        case .unknownOpcode(let o): "WebSocket frame with unknown opcode \(o)"
        case .badMasking(let masked):
            masked ? "masked WebSocket frame from the server" : "unmasked WebSocket frame from the client"
        case .badControlFrame(let s): "bad WebSocket control frame: \(s)"
        case .badLength(let s): "bad WebSocket frame length: \(s)"
        case .messageTooLarge(let limit): "WebSocket message larger than \(limit) bytes"
        case .badFragmentation(let s): "bad WebSocket fragmentation: \(s)"
        case .invalidUTF8: "WebSocket text that is not UTF-8"
        case .badClose(let s): "bad WebSocket close frame: \(s)"
        }
    }
}

/// A frame's opcode (RFC 6455 section 5.2). Thread rule: a value type. Cost: none.
package enum WebSocketOpcode: UInt8, Sendable, Hashable {
    /// The next fragment of a text or binary message.
    case continuation = 0
    /// A text message (UTF-8), or its first fragment.
    case text = 1
    /// A binary message, or its first fragment.
    case binary = 2
    /// The closing handshake.
    case close = 8
    /// A ping, answered with a pong carrying the same payload.
    case ping = 9
    /// A pong.
    case pong = 10
}

/// One whole message read from a WebSocket. Thread rule: a value type. Cost: none.
package enum WebSocketMessage: Sendable, Hashable {
    /// A text message (checked UTF-8).
    case text(String)
    /// A binary message.
    case binary([UInt8])
    /// A ping with its payload (at most 125 bytes).
    case ping([UInt8])
    /// A pong with its payload (at most 125 bytes).
    case pong([UInt8])
    /// The peer closes: its status code (nil when the frame had none) and reason.
    case close(code: UInt16?, reason: String)
}

/// Writes WebSocket frames. Thread rule: static functions, any thread. Cost: one array of the
/// frame's size.
package enum WebSocketFrame {
    /// The frame carrying `payload` with `opcode`, masked with `mask` (4 bytes; a client masks
    /// every frame) or not (nil; a server never masks). `fin` false writes a fragment that more
    /// frames continue. Control frames must be final and at most 125 bytes (not checked here).
    package static func encode(
        _ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>, fin: Bool = true, mask: [UInt8]?
    ) -> [UInt8] {
        let count = payload.count
        var out: [UInt8] = []
        out.reserveCapacity(count + 14)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if count < 126 {
            out.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(count >> 8))
            out.append(UInt8(count & 0xFF))
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((UInt64(count) >> UInt64(shift)) & 0xFF)) }
        }
        if let mask {
            precondition(mask.count == 4, "a WebSocket mask has 4 bytes")
            out += mask
            var i = 0
            for byte in payload {
                out.append(byte ^ mask[i & 3])
                i += 1
            }
        } else {
            out.append(contentsOf: payload)
        }
        return out
    }

    /// A close frame with `code` and `reason` (the reason cut to fit 125 bytes).
    package static func close(code: UInt16, reason: String = "", mask: [UInt8]?) -> [UInt8] {
        let payload = [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8.prefix(123))
        return encode(.close, payload, mask: mask)
    }
}

/// Reads WebSocket frames from bytes handed over as they arrive and returns whole messages.
///
/// A client reads unmasked frames, a server masked ones. Fragments are joined (control frames may
/// come between them), text is checked to be UTF-8, a close frame's code and reason are checked.
/// After a close message nothing more is returned and further bytes are dropped; after an error
/// every call throws that error again. Thread rule: a value type, one owner. Cost: linear in the
/// bytes appended; holds at most the bytes of one unfinished frame plus the unfinished message
/// (each bounded by `maxMessageBytes`) plus the last appended chunk.
package struct WebSocketDecoder: Sendable {
    /// Which side of the connection reads.
    package enum Role: Sendable, Hashable {
        /// A client: reads the server's frames, which are never masked.
        case client
        /// A server: reads the client's frames, which are always masked.
        case server
    }

    /// Which side reads.
    package let role: Role
    /// The longest message taken (bytes, all fragments together).
    package let maxMessageBytes: Int

    private var buffer: [UInt8] = []
    private var position = 0
    private var fragments: [UInt8] = []
    private var fragmentOpcode: WebSocketOpcode?
    private var closed = false
    private var failure: WebSocketError?

    /// A decoder for `role` taking messages of at most `maxMessageBytes`. Cost: none.
    package init(role: Role, maxMessageBytes: Int = 1 << 20) {
        self.role = role
        self.maxMessageBytes = max(0, maxMessageBytes)
    }

    /// Whether a close message has been read.
    package var isClosed: Bool { closed }

    /// Takes the next bytes read from the connection; `next()` then returns the messages they
    /// complete. Cost: one append.
    package mutating func append(_ bytes: some Collection<UInt8>) {
        guard !closed, failure == nil else { return }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, nil while more bytes are needed (or after a close). Throws at the
    /// first frame that breaks RFC 6455 or the message limit. Cost: linear in the frame.
    package mutating func next() throws(WebSocketError) -> WebSocketMessage? {
        if let failure { throw failure }
        do {
            while !closed {
                guard let frame = try parseFrame() else { return nil }
                if let message = try take(frame) { return message }
            }
            return nil
        } catch {
            failure = error
            buffer = []
            position = 0
            throw error
        }
    }

    private struct Frame {
        var fin: Bool
        var opcode: WebSocketOpcode
        var payload: [UInt8]
    }

    /// Parses one frame at `position`, nil while incomplete.
    private mutating func parseFrame() throws(WebSocketError) -> Frame? {
        let available = buffer.count - position
        guard available >= 2 else { return nil }
        let b0 = buffer[position], b1 = buffer[position + 1]
        if b0 & 0x70 != 0 { throw .reservedBits((b0 >> 4) & 7) }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else { throw .unknownOpcode(b0 & 0x0F) }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        if masked != (role == .server) { throw .badMasking(masked: masked) }
        let short = b1 & 0x7F
        let isControl = opcode.rawValue >= 8
        if isControl {
            if !fin { throw .badControlFrame("a fragmented control frame") }
            if short > 125 { throw .badControlFrame("a control frame longer than 125 bytes") }
        }
        var header = 2
        var length: UInt64
        switch short {
        case 126:
            guard available >= 4 else { return nil }
            length = UInt64(buffer[position + 2]) << 8 | UInt64(buffer[position + 3])
            if length < 126 { throw .badLength("\(length) written in 16 bits") }
            header = 4
        case 127:
            guard available >= 10 else { return nil }
            length = 0
            for i in 2..<10 { length = length << 8 | UInt64(buffer[position + i]) }
            if length >> 63 != 0 { throw .badLength("a 64-bit length with its top bit set") }
            if length <= 0xFFFF { throw .badLength("\(length) written in 64 bits") }
            header = 10
        default:
            length = UInt64(short)
        }
        // The limit holds before a byte of the payload is kept.
        let room = opcode == .continuation ? maxMessageBytes - fragments.count : maxMessageBytes
        if !isControl && length > UInt64(max(room, 0)) { throw .messageTooLarge(limit: maxMessageBytes) }
        let size = Int(length)  // Below maxMessageBytes or 126 now, so it fits.
        let maskStart = position + header
        let payloadStart = maskStart + (masked ? 4 : 0)
        guard buffer.count - payloadStart >= size else { return nil }
        var payload = Array(buffer[payloadStart..<(payloadStart + size)])
        if masked {
            let key = (buffer[maskStart], buffer[maskStart + 1], buffer[maskStart + 2], buffer[maskStart + 3])
            for i in payload.indices {
                switch i & 3 {
                case 0: payload[i] ^= key.0
                case 1: payload[i] ^= key.1
                case 2: payload[i] ^= key.2
                default: payload[i] ^= key.3
                }
            }
        }
        position = payloadStart + size
        if position == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.count <= 1 << 16)
            position = 0
        } else if position > 4096 && position * 2 > buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        return Frame(fin: fin, opcode: opcode, payload: payload)
    }

    /// What a frame means: a message, or nil when it was a fragment of one.
    private mutating func take(_ frame: Frame) throws(WebSocketError) -> WebSocketMessage? {
        switch frame.opcode {
        case .ping: return .ping(frame.payload)
        case .pong: return .pong(frame.payload)
        case .close:
            closed = true
            buffer = []
            position = 0
            return try Self.close(frame.payload)
        case .continuation:
            guard let opcode = fragmentOpcode else { throw .badFragmentation("a continuation without a message") }
            fragments += frame.payload
            guard frame.fin else { return nil }
            fragmentOpcode = nil
            let whole = fragments
            fragments = []
            return try Self.message(opcode, whole)
        case .text, .binary:
            guard fragmentOpcode == nil else { throw .badFragmentation("a new message before the last one ended") }
            if frame.fin { return try Self.message(frame.opcode, frame.payload) }
            fragmentOpcode = frame.opcode
            fragments = frame.payload
            return nil
        }
    }

    private static func message(_ opcode: WebSocketOpcode, _ payload: [UInt8]) throws(WebSocketError) -> WebSocketMessage {
        guard opcode == .text else { return .binary(payload) }
        guard let text = String(validating: payload, as: UTF8.self) else { throw .invalidUTF8 }
        return .text(text)
    }

    /// RFC 6455 section 5.5.1 and 7.4: no payload, or a status code and a UTF-8 reason.
    private static func close(_ payload: [UInt8]) throws(WebSocketError) -> WebSocketMessage {
        if payload.isEmpty { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { throw .badClose("a one-byte payload") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        let allowed = (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code)
        guard allowed else { throw .badClose("status code \(code)") }
        guard let reason = String(validating: payload[2...], as: UTF8.self) else { throw .invalidUTF8 }
        return .close(code: code, reason: reason)
    }
}

/// The client's side of the opening handshake (RFC 6455 section 4.1): the upgrade request with a
/// fresh `Sec-WebSocket-Key`, and the check of the server's answer (101, `Upgrade: websocket`,
/// `Connection: Upgrade`, the `Sec-WebSocket-Accept` derived from our key, the subprotocol we
/// asked for and no extension we did not). Thread rule: a value type. Cost: one SHA-1.
package struct WebSocketHandshake: Sendable, Hashable {
    /// The key sent, base64 of 16 random bytes.
    package let key: String
    /// The subprotocol asked for (`janus-protocol` for Janus), nil for none.
    package let subprotocol: String?

    /// A handshake with `key` (16 bytes; random by default) asking for `subprotocol`.
    package init(key: [UInt8] = RandomBytes.bytes(16), subprotocol: String?) {
        self.key = Base64.encode(key)
        self.subprotocol = subprotocol
    }

    /// The `Sec-WebSocket-Accept` a server answers `key` with: base64 of the SHA-1 of the key and
    /// RFC 6455's GUID. Cost: one SHA-1.
    package static func accept(forKey key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        _ = input.withUnsafeBytes { i in
            digest.withUnsafeMutableBufferPointer { cms_sha1(i.baseAddress, i.count, $0.baseAddress) }
        }
        return Base64.encode(digest)
    }

    /// The upgrade request for `path` on `host` (the Host field's value, with the port when it is
    /// not the scheme's default). Throws `.handshake` when the path, host or subprotocol cannot
    /// be written (a space in the path, a line break anywhere). Cost: a few strings.
    package func request(host: String, path: String) throws(WebSocketError) -> [UInt8] {
        var fields = [
            ("Host", host), ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", key),
            ("Sec-WebSocket-Version", "13"),
        ]
        if let subprotocol { fields.append(("Sec-WebSocket-Protocol", subprotocol)) }
        do throws(HTTPMessageError) {
            return try HTTPHead.request("GET", path, fields).encoded()
        } catch {
            throw .handshake("cannot write the upgrade request for \(path): \(error)")
        }
    }

    /// Checks the server's answer; throws `.handshake` saying what is wrong.
    package func check(_ head: HTTPHead) throws(WebSocketError) {
        guard case .status(_, let code, let reason) = head.startLine else { throw .handshake("not a status line") }
        guard code == 101 else { throw .handshake("status \(code) \(reason)") }
        guard head.field("upgrade")?.lowercased() == "websocket" else {
            throw .handshake("Upgrade is \(head.field("upgrade") ?? "missing")")
        }
        let connection = head.values("connection").flatMap { $0.split(separator: ",") }
        guard connection.contains(where: { $0.trimmingWhitespace.lowercased() == "upgrade" }) else {
            throw .handshake("Connection does not say Upgrade")
        }
        guard head.field("sec-websocket-accept") == Self.accept(forKey: key) else {
            throw .handshake(
                "Sec-WebSocket-Accept is \(head.field("sec-websocket-accept") ?? "missing"), not the one for our key")
        }
        let chosen = head.field("sec-websocket-protocol")
        guard chosen == subprotocol else {
            throw .handshake("subprotocol \(chosen ?? "none") instead of \(subprotocol ?? "none")")
        }
        if let extensions = head.field("sec-websocket-extensions"), !extensions.isEmpty {
            throw .handshake("extensions \(extensions) that were not asked for")
        }
    }
}
