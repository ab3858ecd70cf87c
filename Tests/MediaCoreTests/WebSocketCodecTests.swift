// The WebSocket codec (RFC 6455): the handshake's accept value and checks, section 5.7's example
// frames both ways, fragmentation, the three length forms, and hostile frames (overflowing and
// oversize lengths, reserved bits and opcodes, wrong masking, bad fragmentation and close
// payloads), each a typed error and never a trap; the endpoint URLs the Janus client takes.
import Foundation
import FuzzEntries
import MediaCore
import Testing

struct WebSocketCodecTests {
    static let hello = Array("Hello".utf8)

    /// Every message of `bytes` read by `role`, or the first error.
    static func decode(_ bytes: [UInt8], role: WebSocketDecoder.Role = .client, limit: Int = 1 << 20) -> Result<
        [WebSocketMessage], WebSocketError
    > {
        var decoder = WebSocketDecoder(role: role, maxMessageBytes: limit)
        decoder.append(bytes)
        var out: [WebSocketMessage] = []
        do {
            while let m = try decoder.next() { out.append(m) }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    @Test func handshakeAcceptIsTheRFCExample() throws {
        // RFC 6455 section 1.3.
        #expect(WebSocketHandshake.accept(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        let nonce: [UInt8] = Array("the sample nonce".utf8)
        let h = WebSocketHandshake(key: nonce, subprotocol: "janus-protocol")
        #expect(h.key == "dGhlIHNhbXBsZSBub25jZQ==")
        let request = String(decoding: try h.request(host: "janus.example:8188", path: "/"), as: UTF8.self)
        #expect(request.hasPrefix("GET / HTTP/1.1\r\nHost: janus.example:8188\r\n"))
        #expect(request.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"))
        #expect(request.contains("Sec-WebSocket-Protocol: janus-protocol\r\n") && request.hasSuffix("\r\n\r\n"))

        func head(_ text: String) throws -> HTTPHead {
            let decoded = try HTTPMessageDecoder.decode(Array(text.utf8), as: .response(toMethod: "GET"), complete: true)
            return try #require(decoded).head
        }
        let good =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n"
        try h.check(try head(good))
        let bad: [(String, String)] = [
            (good.replacingOccurrences(of: "101 Switching Protocols", with: "200 OK"), "status 200 OK"),
            (
                good.replacingOccurrences(of: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", with: "x"),
                "Sec-WebSocket-Accept is x, not the one for our key"
            ),
            (good.replacingOccurrences(of: "janus-protocol", with: "other"), "subprotocol other instead of janus-protocol"),
            (good.replacingOccurrences(of: "keep-alive, Upgrade", with: "close"), "Connection does not say Upgrade"),
            (good.replacingOccurrences(of: "WebSocket\r\n", with: "h2c\r\n"), "Upgrade is h2c"),
            (
                good.replacingOccurrences(of: "\r\n\r\n", with: "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"),
                "extensions permessage-deflate that were not asked for"
            ),
        ]
        for (text, reason) in bad {
            #expect(throws: WebSocketError.handshake(reason)) { try h.check(try head(text)) }
        }
    }

    @Test func rfcExampleFramesBothWays() {
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        // RFC 6455 section 5.7.
        let unmasked: [UInt8] = [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]
        let masked: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(WebSocketFrame.encode(.text, Self.hello, mask: nil) == unmasked)
        #expect(WebSocketFrame.encode(.text, Self.hello, mask: mask) == masked)
        #expect(Self.decode(unmasked) == .success([.text("Hello")]))
        #expect(Self.decode(masked, role: .server) == .success([.text("Hello")]))
        let fragmented: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F]
        #expect(Self.decode(fragmented) == .success([.text("Hello")]))
        #expect(WebSocketFrame.encode(.text, Self.hello[0..<3], fin: false, mask: nil) == Array(fragmented[0..<5]))
        #expect(WebSocketFrame.encode(.continuation, Self.hello[3...], mask: nil) == Array(fragmented[5...]))
        let ping: [UInt8] = [0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]
        #expect(Self.decode(ping) == .success([.ping(Self.hello)]))
        let pong: [UInt8] = [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(WebSocketFrame.encode(.pong, Self.hello, mask: mask) == pong)
        #expect(Self.decode(pong, role: .server) == .success([.pong(Self.hello)]))
        // 256 bytes with a 16-bit length, 65536 with a 64-bit one.
        let b256 = WebSocketFrame.encode(.binary, [UInt8](repeating: 7, count: 256), mask: nil)
        #expect(Array(b256[0..<4]) == [0x82, 0x7E, 0x01, 0x00] && b256.count == 260)
        let b64k = WebSocketFrame.encode(.binary, [UInt8](repeating: 7, count: 65_536), mask: nil)
        #expect(Array(b64k[0..<10]) == [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0] && b64k.count == 65_546)
        #expect(Self.decode(b256) == .success([.binary([UInt8](repeating: 7, count: 256))]))
        #expect(Self.decode(b64k) == .success([.binary([UInt8](repeating: 7, count: 65_536))]))
        // A control frame between fragments; a close ends the stream, what follows is dropped.
        let mixed =
            Array(fragmented[0..<5]) + ping + Array(fragmented[5...])
            + WebSocketFrame.close(code: 1001, reason: "away", mask: nil)
            + unmasked
        #expect(Self.decode(mixed) == .success([.ping(Self.hello), .text("Hello"), .close(code: 1001, reason: "away")]))
        #expect(Self.decode([0x88, 0x00]) == .success([.close(code: nil, reason: "")]))
    }

    @Test func byteByByteGivesTheSameMessages() {
        let mask: [UInt8] = [1, 2, 3, 4]
        let frames =
            WebSocketFrame.encode(.text, Array("{\"janus\":\"ack\"}".utf8), fin: false, mask: mask)
            + WebSocketFrame.encode(.ping, [9], mask: mask)
            + WebSocketFrame.encode(.continuation, [UInt8](repeating: 0x20, count: 70_000), mask: mask)
            + WebSocketFrame.encode(.binary, [], mask: mask)
        var decoder = WebSocketDecoder(role: .server)
        var out: [WebSocketMessage] = []
        for byte in frames {
            decoder.append([byte])
            while let m = try? decoder.next() { out.append(m) }
        }
        #expect(out.count == 3)
        #expect(out.first == .ping([9]) && out.last == .binary([]))
        if case .text(let t) = out[1] { #expect(t.utf8.count == 15 + 70_000) } else { Issue.record("\(out[1])") }
    }

    @Test func hostileFramesAreTypedErrors() throws {
        let cases: [(String, [UInt8], WebSocketDecoder.Role, WebSocketError)] = [
            (
                "64-bit length 2^63 - 1", [0x82, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .client,
                .messageTooLarge(limit: 1000)
            ),
            (
                "64-bit length top bit", [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0], .client,
                .badLength("a 64-bit length with its top bit set")
            ),
            (
                "64-bit length 2^64 - 1", [0x82, 0x7F] + [UInt8](repeating: 0xFF, count: 8), .client,
                .badLength("a 64-bit length with its top bit set")
            ),
            ("64-bit length below 65536", [0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0, 5], .client, .badLength("5 written in 64 bits")),
            ("16-bit length below 126", [0x82, 0x7E, 0, 5], .client, .badLength("5 written in 16 bits")),
            ("16-bit length beyond the limit", [0x82, 0x7E, 0xFF, 0xFF], .client, .messageTooLarge(limit: 1000)),
            ("opcode 3", [0x83, 0x00], .client, .unknownOpcode(3)),
            ("opcode 11", [0x8B, 0x00], .client, .unknownOpcode(11)),
            ("RSV1", [0xC1, 0x00], .client, .reservedBits(4)),
            ("masked from a server", [0x81, 0x81, 1, 2, 3, 4, 5], .client, .badMasking(masked: true)),
            ("unmasked from a client", [0x81, 0x01, 0x41], .server, .badMasking(masked: false)),
            ("fragmented ping", [0x09, 0x00], .client, .badControlFrame("a fragmented control frame")),
            ("ping of 126 bytes", [0x89, 0x7E, 0, 126], .client, .badControlFrame("a control frame longer than 125 bytes")),
            ("continuation first", [0x80, 0x01, 0x41], .client, .badFragmentation("a continuation without a message")),
            (
                "a new message inside one", [0x01, 0x01, 0x41, 0x81, 0x01, 0x41], .client,
                .badFragmentation("a new message before the last one ended")
            ),
            ("text not UTF-8", [0x81, 0x02, 0xC3, 0x28], .client, .invalidUTF8),
            ("close of one byte", [0x88, 0x01, 0x03], .client, .badClose("a one-byte payload")),
            ("close status 1005", [0x88, 0x02, 0x03, 0xED], .client, .badClose("status code 1005")),
            ("close status 999", [0x88, 0x02, 0x03, 0xE7], .client, .badClose("status code 999")),
            ("close reason not UTF-8", [0x88, 0x03, 0x03, 0xE8, 0xFF], .client, .invalidUTF8),
        ]
        for (name, bytes, role, expected) in cases {
            #expect(Self.decode(bytes, role: role, limit: 1000) == .failure(expected), "\(name)")
        }
        // Fragments that add up beyond the limit fail at the header of the one that crosses it,
        // before its payload arrives.
        var decoder = WebSocketDecoder(role: .client, maxMessageBytes: 1000)
        decoder.append(WebSocketFrame.encode(.binary, [UInt8](repeating: 1, count: 600), fin: false, mask: nil))
        decoder.append([0x00, 0x7E, 0x01, 0x90])  // 400 more: 1000 in all, allowed
        #expect(try decoder.next() == nil)
        decoder.append([UInt8](repeating: 2, count: 400))
        decoder.append([0x80, 0x01])  // one more byte beyond the limit
        #expect(throws: WebSocketError.messageTooLarge(limit: 1000)) { _ = try decoder.next() }
        // After an error every call throws it again; appending does not grow anything.
        decoder.append([UInt8](repeating: 0, count: 10_000))
        #expect(throws: WebSocketError.messageTooLarge(limit: 1000)) { _ = try decoder.next() }
    }

    @Test func committedSeedsAreTheFuzzEntrySeeds() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/fuzz-websocket")
        for (name, bytes) in FuzzEntries.webSocketSeeds() {
            let file = try Data(contentsOf: dir.appendingPathComponent(name))
            #expect([UInt8](file) == bytes, "\(name)")
            bytes.withUnsafeBytes { FuzzEntries.webSocket($0) }
        }
    }

    @Test func endpointURLs() throws {
        let wss = try JanusEndpoint(url: "wss://janus.example.org:8989", certificateAuthorityFile: "/ca.pem", token: "t")
        #expect(wss.transport == .webSocket && wss.host == "janus.example.org" && wss.port == 8989 && wss.path == "/")
        #expect(wss.tls == TLSClientSettings(certificateAuthorityFile: "/ca.pem") && wss.token == "t")
        let https = try JanusEndpoint(url: "HTTPS://[::1]/janus/")
        #expect(
            https.transport == .http && https.host == "::1" && https.port == 443 && https.path == "/janus" && https.tls != nil)
        let http = try JanusEndpoint(url: "http://localhost")
        #expect(http.port == 80 && http.path == "/janus" && http.tls == nil)
        let ws = try JanusEndpoint(url: "ws://10.0.0.1:8188/ws")
        #expect(ws.transport == .webSocket && ws.tls == nil && ws.path == "/ws")
        for bad in [
            "ftp://host/", "http://", "http://host:0/", "http://host:65536/", "http://user@host/", "http://host/a b",
            "http://host/janus?x=1", "http://[::1/", "http://[zz]/", "http://ho\r\nst/", "wss://host:port/", "janus",
            "http://h\u{e9}st/", "http://host/\r\nX: y",
        ] {
            #expect(throws: JanusError.self, "\(bad)") { _ = try JanusEndpoint(url: bad) }
        }
        #expect(JanusEndpoint.percentEncoded("a b&c=d/é") == "a%20b%26c%3Dd%2F%C3%A9")
        let e = JanusEndpoint(server: .loopbackIPv6(port: 8088))
        #expect(e.host == "::1" && e.port == 8088 && e.path == "/janus")
    }
}
