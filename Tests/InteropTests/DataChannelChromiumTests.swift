// Data channels against headless Chromium (scripts/webrtc/chromium_peer.py on chromium_page.html,
// with the data channel page functions below evaluated into the page): Chromium opens a channel
// to us (its offer, our answer) and we open one to it (our offer, its answer). 1,000 text
// messages each way must arrive complete and in order, and a 256 KiB binary message each way
// intact. A browser that is missing or cannot start fails the test with the reason.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct DataChannelChromiumTests {
    static let count = 1000

    /// Page functions: `dcPeer(n)` makes the connection; every channel it sees (its own or the
    /// peer's) sends n messages p0 .. p(n-1) and then 256 KiB (byte i is i % 251) once open, and
    /// records what arrives; `dcStats(n)` says whether the text received was exactly r0 .. r(n-1).
    static let pageFunctions = """
        window.dcPeer = function(count) {
          window.dcState = {received: [], labels: [], binary: ''};
          window.dpc = new RTCPeerConnection();
          window.dcWatch = ch => {
            dcState.labels.push(ch.label);
            ch.binaryType = 'arraybuffer';
            ch.onmessage = e => {
              if (typeof e.data === 'string') { dcState.received.push(e.data); return; }
              const b = new Uint8Array(e.data);
              let ok = true;
              for (let i = 0; i < b.length; i++) if (b[i] !== i % 251) { ok = false; break; }
              dcState.binary = 'binary:' + b.length + ':' + (ok ? 'ok' : 'bad');
            };
            const sendAll = () => {
              for (let i = 0; i < count; i++) ch.send('p' + i);
              const big = new Uint8Array(262144);
              for (let i = 0; i < big.length; i++) big[i] = i % 251;
              ch.send(big);
            };
            if (ch.readyState === 'open') sendAll(); else ch.onopen = sendAll;
          };
          dpc.ondatachannel = e => dcWatch(e.channel);
          return 'ready';
        };
        window.dcOffer = async function(count) {
          dcPeer(count);
          dcWatch(dpc.createDataChannel('from-chromium'));
          await dpc.setLocalDescription(await dpc.createOffer());
          await gathered(dpc);
          return dpc.localDescription.sdp;
        };
        window.dcAnswer = async function(count, sdp) {
          dcPeer(count);
          await dpc.setRemoteDescription({type: 'offer', sdp});
          await dpc.setLocalDescription(await dpc.createAnswer());
          await gathered(dpc);
          return dpc.localDescription.sdp;
        };
        window.dcStats = function(n) {
          const r = dcState.received;
          return JSON.stringify({state: dpc.connectionState, labels: dcState.labels.join(','), received: r.length,
            inOrder: r.length === n && r.every((m, i) => m === 'r' + i), binary: dcState.binary});
        };
        'defined'
        """

    static func configuration() -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        c.bindAddress = .anyIPv4(port: 0)
        return c
    }

    static func quoted(_ s: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [s]), as: UTF8.self).dropFirst().dropLast().description
    }

    static func stats(_ peer: JSONLinePeer) -> [String: Any] {
        guard let text = try? peer.call(["op": "dcStats", "js": "dcStats(\(count))"])["sdp"],
            let obj = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        else { return [:] }
        return obj
    }

    /// Sends our 1,000 messages and 256 KiB on `channel` and checks both directions.
    static func exchange(_ channel: DataChannel, _ received: DataChannelRecorder, peer: JSONLinePeer, label: String) async throws
    {
        let start = Date()
        for i in 0..<count { try channel.send("r\(i)") }
        let pattern = (0..<262_144).map { UInt8($0 % 251) }
        try channel.send(pattern)
        #expect(await waitFor(timeout: 60) { received.count >= count + 1 })
        var stats: [String: Any] = [:]
        #expect(
            await waitFor(timeout: 60) {
                stats = Self.stats(peer)
                return stats["inOrder"] as? Bool == true && stats["binary"] as? String == "binary:262144:ok"
            }, "Chromium: \(stats)")
        let elapsed = Date().timeIntervalSince(start)
        #expect(received.texts == (0..<count).map { "p\($0)" })
        #expect(received.messages.withLock { $0.last } == .binary(pattern))
        print("data channel \(label): \(count) messages and 256 KiB each way in \(String(format: "%.2f", elapsed)) s")
    }

    @Test func chromiumOpensAChannelToUs() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        _ = try peer.call(["op": "define", "js": Self.pageFunctions])
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let inbox = DataChannelInbox()
        inbox.attach(to: connection)
        let offer = try #require(try peer.call(["op": "dcOffer", "js": "dcOffer(\(Self.count))"])["sdp"])
        let parsed = try JSEPSessionDescription(parsing: offer, type: .offer)
        let section = try #require(parsed.media.first { $0.isDataChannel })
        #expect(section.sctpPort == 5000)
        try await connection.setRemoteDescription(parsed)
        let answer = try await connection.createAnswer()
        _ = try peer.call([
            "op": "take",
            "js": "dpc.setRemoteDescription({type: 'answer', sdp: \(Self.quoted(answer.sdp))}).then(() => dpc.signalingState)",
        ])
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(
            state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); Chromium \(Self.stats(peer))"
        )
        #expect(await waitFor(timeout: 30) { inbox.channel("from-chromium") != nil })
        let (channel, received) = try #require(inbox.channel("from-chromium"))
        try await Self.exchange(channel, received, peer: peer, label: "Chromium→Revue")
    }

    @Test func weOpenAChannelToChromium() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        _ = try peer.call(["op": "define", "js": Self.pageFunctions])
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let channel = try connection.createDataChannel(label: "from-revue")
        let received = DataChannelRecorder()
        received.attach(channel)
        let offer = try await connection.createOffer()
        let answer = try #require(
            try peer.call(["op": "dcAnswer", "js": "dcAnswer(\(Self.count), \(Self.quoted(offer.sdp)))"])["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(
            state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); Chromium \(Self.stats(peer))"
        )
        #expect(await waitFor(timeout: 30) { channel.readyState == .open })
        try await Self.exchange(channel, received, peer: peer, label: "Revue→Chromium")
        #expect(Self.stats(peer)["labels"] as? String == "from-revue")
    }
}
