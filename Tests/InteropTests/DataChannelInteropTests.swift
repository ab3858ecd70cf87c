// Data channels against aiortc (scripts/webrtc/aiortc_datachannel_peer.py in .venv-interop), an
// independent SCTP and DCEP implementation: aiortc opens a channel to us (its offer, our answer)
// and we open one to it (our offer, its answer); 1,000 text messages each way must arrive
// complete and in order on both sides; a binary message of 256 KiB (or aiortc's
// a=max-message-size, if lower) from each side arrives intact; one byte over that limit is refused.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct DataChannelInteropTests {
    static let count = 1000

    static func startAiortc() throws -> JSONLinePeer {
        let python = JSEPInteropTests.root + "/.venv-interop/bin/python3"
        return try JSONLinePeer(
            name: "aiortc", executable: python, arguments: [JSEPInteropTests.root + "/scripts/webrtc/aiortc_datachannel_peer.py"])
    }

    static func configuration() -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        // aiortc offers its interface addresses, not loopback: ours must be reachable from them.
        c.bindAddress = .anyIPv4(port: 0)
        return c
    }

    @Test func aiortcOpensAChannelToUs() async throws {
        let peer = try Self.startAiortc()
        defer { peer.stop() }
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let inbox = DataChannelInbox()
        inbox.attach(to: connection)
        let offer = try #require(
            try peer.call(["op": "offer", "label": "from-aiortc", "count": "\(Self.count)", "prefix": "p"])["sdp"])
        let parsed = try JSEPSessionDescription(parsing: offer, type: .offer)
        #expect(parsed.media.contains { $0.isDataChannel })
        try await connection.setRemoteDescription(parsed)
        let answer = try await connection.createAnswer()
        _ = try peer.call(["op": "remote-answer", "sdp": answer.sdp])
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error")")
        let start = Date()
        #expect(await waitFor(timeout: 30) { inbox.channel("from-aiortc") != nil })
        let (channel, received) = try #require(inbox.channel("from-aiortc"))
        for i in 0..<Self.count { try channel.send("r\(i)") }
        #expect(await waitFor(timeout: 60) { received.count >= Self.count })
        var stats: [String: String] = [:]
        #expect(
            await waitFor(timeout: 60) {
                stats = (try? peer.call(["op": "stats", "expect": "r", "count": "\(Self.count)"])) ?? [:]
                return stats["in_order"] == "1"
            }, "aiortc: \(stats)")
        let elapsed = Date().timeIntervalSince(start)
        #expect(received.texts == (0..<Self.count).map { "p\($0)" })

        // 256 KiB binary both ways (aiortc's messages come in parts and are joined here).
        let limit = try #require(parsed.media.first { $0.isDataChannel }?.maxMessageSize)
        let size = min(limit, 262_144)
        let pattern = (0..<size).map { UInt8($0 % 251) }
        _ = try peer.call(["op": "echo-binary", "size": "\(size)"])
        try channel.send(pattern)
        #expect(await waitFor(timeout: 30) { received.count >= Self.count + 1 })
        #expect(received.messages.withLock { $0.last } == .binary(pattern))
        #expect(
            await waitFor(timeout: 30) {
                stats = (try? peer.call(["op": "stats"])) ?? [:]
                return stats["last"] == "binary:\(size):ok"
            }, "aiortc: \(stats)")
        // The limit aiortc announced in a=max-message-size: more is refused here, not sent.
        #expect(throws: DataChannelError.messageTooLarge(size: limit + 1, limit: limit)) {
            try channel.send([UInt8](repeating: 0, count: limit + 1))
        }
        print("data channel aiortc→Revue: \(Self.count) messages each way in \(String(format: "%.2f", elapsed)) s")
    }

    @Test func weOpenAChannelToAiortc() async throws {
        let peer = try Self.startAiortc()
        defer { peer.stop() }
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let channel = try connection.createDataChannel(label: "from-revue")
        let received = DataChannelRecorder()
        received.attach(channel)
        let offer = try await connection.createOffer()
        let answer = try #require(
            try peer.call(["op": "answer", "sdp": offer.sdp, "count": "\(Self.count)", "prefix": "p"])["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error")")
        let start = Date()
        #expect(await waitFor(timeout: 30) { channel.readyState == .open })
        for i in 0..<Self.count { try channel.send("r\(i)") }
        #expect(await waitFor(timeout: 60) { received.count >= Self.count })
        var stats: [String: String] = [:]
        #expect(
            await waitFor(timeout: 60) {
                stats = (try? peer.call(["op": "stats", "expect": "r", "count": "\(Self.count)"])) ?? [:]
                return stats["in_order"] == "1"
            }, "aiortc: \(stats)")
        let elapsed = Date().timeIntervalSince(start)
        #expect(stats["labels"] == "from-revue")
        #expect(received.texts == (0..<Self.count).map { "p\($0)" })
        print("data channel Revue→aiortc: \(Self.count) messages each way in \(String(format: "%.2f", elapsed)) s")
    }
}
