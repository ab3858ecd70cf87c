import MediaCore

extension FuzzEntries {
    /// WebSocket framing (`WebSocketDecoder`, what the Janus WebSocket transport reads) on any
    /// bytes, with a 4 KiB message limit. Byte 0: bit 0 picks the server's side (masked frames
    /// expected) rather than the client's; bits 1-7 plus one are the size of the pieces the rest is
    /// also fed in.
    ///
    /// Properties: decoding never traps; fed whole or in pieces, the input gives the same messages
    /// and the same error; no data message is longer than the limit and no control payload longer
    /// than 125 bytes; the messages written again as frames (masked when the reader is a server,
    /// data messages in fragments) decode to the same messages.
    /// Thread rule: any thread. Cost: a few decodes of the input.
    @Sendable public static func webSocket(_ data: UnsafeRawBufferPointer) {
        guard let mode = data.first else { return }
        let rest = Array(data[1...])
        let role: WebSocketDecoder.Role = mode & 1 == 1 ? .server : .client
        let limit = 4096
        let whole = webSocketDecode([rest[...]], role, limit)
        let step = Int(mode >> 1) + 1
        let pieces = stride(from: 0, to: rest.count, by: step).map { rest[$0..<min($0 + step, rest.count)] }
        let split = webSocketDecode(pieces, role, limit)
        fuzzRequire(split.messages == whole.messages && split.error == whole.error, "whole and in pieces of \(step) disagree")
        var again: [UInt8] = []
        let mask: [UInt8]? = role == .server ? [0x12, 0x34, 0x56, 0x78] : nil
        for message in whole.messages {
            switch message {
            case .text(let text):
                fuzzRequire(text.utf8.count <= limit, "text beyond the limit")
                again += webSocketFragments(.text, Array(text.utf8), mask: mask)
            case .binary(let bytes):
                fuzzRequire(bytes.count <= limit, "binary beyond the limit")
                again += webSocketFragments(.binary, bytes, mask: mask)
            case .ping(let p):
                fuzzRequire(p.count <= 125, "a ping beyond 125 bytes")
                again += WebSocketFrame.encode(.ping, p, mask: mask)
            case .pong(let p):
                fuzzRequire(p.count <= 125, "a pong beyond 125 bytes")
                again += WebSocketFrame.encode(.pong, p, mask: mask)
            case .close(let code, let reason):
                let payload = code.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] + Array(reason.utf8) } ?? []
                fuzzRequire(payload.count <= 125, "a close beyond 125 bytes")
                again += WebSocketFrame.encode(.close, payload, mask: mask)
            }
        }
        let back = webSocketDecode([again[...]], role, limit)
        fuzzRequire(back.error == nil && back.messages == whole.messages, "messages written again decode differently")
    }

    /// A data message as fragments of 1, 4, 13... bytes (one empty frame for an empty message).
    static func webSocketFragments(_ opcode: WebSocketOpcode, _ payload: [UInt8], mask: [UInt8]?) -> [UInt8] {
        guard !payload.isEmpty else { return WebSocketFrame.encode(opcode, [], mask: mask) }
        var out: [UInt8] = []
        var at = 0
        var size = 1
        while at < payload.count {
            let n = min(size, payload.count - at)
            let last = at + n == payload.count
            out += WebSocketFrame.encode(at == 0 ? opcode : .continuation, payload[at..<(at + n)], fin: last, mask: mask)
            at += n
            size = size * 3 + 1
        }
        return out
    }

    /// The seed inputs of fuzz-websocket: RFC 6455 section 5.7's example frames (a text frame
    /// unmasked and masked, a fragmented text, a ping, a masked pong, 16-bit lengths), a close
    /// with a reason, and hostile frames (a 64-bit length of 2^63 - 1, an unknown opcode).
    public static func webSocketSeeds() -> [(name: String, bytes: [UInt8])] {
        let hello: [UInt8] = [0x48, 0x65, 0x6C, 0x6C, 0x6F]
        let maskedHello: [UInt8] = [0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        let seeds: [(String, UInt8, [UInt8])] = [
            ("rfc-text-unmasked", 0, [0x81, 0x05] + hello),
            ("rfc-text-masked", 1, [0x81, 0x85] + maskedHello),
            ("rfc-fragmented", 4, [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F]),
            ("rfc-ping-then-text", 2, [0x89, 0x05] + hello + [0x81, 0x05] + hello),
            ("rfc-masked-pong", 1, [0x8A, 0x85] + maskedHello),
            ("binary-16-bit-length", 8, [0x82, 0x7E, 0x01, 0x00] + [UInt8](repeating: 0xA5, count: 256)),
            ("close-with-reason", 0, [0x88, 0x06, 0x03, 0xE9] + Array("bye!".utf8).prefix(4)),
            ("hostile-64-bit-length", 0, [0x81, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x41]),
            ("hostile-opcode", 0, [0x83, 0x00, 0x81, 0x01, 0x41]),
        ]
        return seeds.map { ($0.0, [$0.1] + $0.2) }
    }

    /// Feeds `pieces` one after another; every message until the first error (or the end).
    static func webSocketDecode(
        _ pieces: [ArraySlice<UInt8>], _ role: WebSocketDecoder.Role, _ limit: Int
    ) -> (messages: [WebSocketMessage], error: WebSocketError?) {
        var decoder = WebSocketDecoder(role: role, maxMessageBytes: limit)
        var messages: [WebSocketMessage] = []
        do {
            for piece in pieces {
                decoder.append(piece)
                while let m = try decoder.next() { messages.append(m) }
            }
            return (messages, nil)
        } catch {
            return (messages, error)
        }
    }
}
