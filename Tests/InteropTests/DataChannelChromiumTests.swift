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

    /// Page functions of the bulk transfer: `tpAnswer(total, sdp)` answers our offer and counts
    /// the bytes arriving on the channel we open (`tpReceived()`); `tpSend(total)` sends that
    /// many bytes back on it in 64 KiB messages, keeping at most 1 MiB buffered, and resolves
    /// once all are queued; `tpLocal(total)` does the same between two connections inside the
    /// page and resolves with the milliseconds from the first message sent to the last byte
    /// received.
    static let throughputFunctions = """
        window.tpCount = (state, ch) => {
          ch.binaryType = 'arraybuffer';
          ch.onmessage = e => {
            if (state.bytes === 0) state.start = performance.now();
            state.bytes += e.data.byteLength;
            if (state.bytes >= state.total && !state.done) state.done = performance.now();
          };
        };
        window.tpPump = (ch, total) => new Promise(done => {
          const chunk = new Uint8Array(65536);
          let sent = 0;
          ch.bufferedAmountLowThreshold = 262144;
          const pump = () => {
            while (sent < total && ch.bufferedAmount < 1048576) { ch.send(chunk); sent += chunk.length; }
            if (sent >= total) { ch.onbufferedamountlow = null; done('queued'); }
          };
          ch.onbufferedamountlow = pump;
          pump();
        });
        window.tpAnswer = async function(total, sdp) {
          window.tpState = {bytes: 0, total, start: 0, done: 0};
          window.tpc = new RTCPeerConnection();
          tpc.ondatachannel = e => { window.tpChannel = e.channel; tpCount(tpState, e.channel); };
          await tpc.setRemoteDescription({type: 'offer', sdp});
          await tpc.setLocalDescription(await tpc.createAnswer());
          await gathered(tpc);
          return tpc.localDescription.sdp;
        };
        window.tpReceived = () => JSON.stringify(tpState);
        window.tpSend = total => tpPump(tpChannel, total);
        window.tpLocal = async function(total) {
          const a = new RTCPeerConnection(), b = new RTCPeerConnection();
          a.onicecandidate = e => { if (e.candidate) b.addIceCandidate(e.candidate); };
          b.onicecandidate = e => { if (e.candidate) a.addIceCandidate(e.candidate); };
          const state = {bytes: 0, total, start: 0, done: 0};
          const finished = new Promise(done => {
            b.ondatachannel = e => {
              tpCount(state, e.channel);
              const count = e.channel.onmessage;
              e.channel.onmessage = m => { count(m); if (state.done) done(); };
            };
          });
          const ch = a.createDataChannel('bulk');
          const opened = new Promise(done => { ch.onopen = done; });
          await a.setLocalDescription(await a.createOffer());
          await b.setRemoteDescription(a.localDescription);
          await b.setLocalDescription(await b.createAnswer());
          await a.setRemoteDescription(b.localDescription);
          await opened;
          const start = performance.now();
          await tpPump(ch, total);
          await finished;
          const ms = state.done - start;
          a.close(); b.close();
          return String(ms);
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

    /// Bulk transfer on a reliable, ordered channel: 16 MiB in 64 KiB messages Revue→Chromium,
    /// then Chromium→Revue on the same channel, each sender keeping at most 1 MiB buffered; and
    /// the same 16 MiB between two connections inside the page (Chromium to Chromium, the
    /// anchor) on the same loopback. Prints the rate of each; asserts that every byte arrived.
    /// Revue's side runs in the test's build (debug in `make test-e2e`): a lower bound for a
    /// release build.
    @Test(.timeLimit(.minutes(5))) func bulkTransferBothWaysBesideChromiumToChromium() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        _ = try peer.call(["op": "define", "js": Self.throughputFunctions])
        let total = 16 << 20
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let channel = try connection.createDataChannel(label: "bulk")
        let bytesIn = Atomic<Int>(0)
        channel.onMessage = { m in
            if case .binary(let b) = m { bytesIn.add(b.count, ordering: .relaxed) }
        }
        let offer = try await connection.createOffer()
        let answer = try #require(
            try peer.call(["op": "tpAnswer", "js": "tpAnswer(\(total), \(Self.quoted(offer.sdp)))"])["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
        try #require(await connection.waitUntilSettled(timeout: 60) == .connected)
        #expect(await waitFor(timeout: 30) { channel.readyState == .open })
        func received() -> Int {
            guard let text = try? peer.call(["op": "tpReceived", "js": "tpReceived()"])["sdp"],
                let obj = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            else { return 0 }
            return (obj["bytes"] as? NSNumber)?.intValue ?? 0
        }
        func rate(_ d: Duration) -> Double {
            Double(total) * 8 / 1e6 / (Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
        }

        // Revue → Chromium.
        let chunk = [UInt8](repeating: 0x5A, count: 65_536)
        // Keep 1 MiB queued and refill when SCTP has taken it down to 256 KiB, as a browser app
        // does with `bufferedamountlow`: no polling. The stream ends if the channel closes.
        let (lows, low) = AsyncStream.makeStream(of: Void.self)
        channel.bufferedAmountLowThreshold = 256 << 10
        channel.onBufferedAmountLow = { low.yield() }
        channel.onClose = { low.finish() }
        var nextLow = lows.makeAsyncIterator()
        let out = ContinuousClock.now
        var sent = 0
        while sent < total {
            if channel.bufferedAmount < 1 << 20 {
                try channel.send(chunk)
                sent += chunk.count
            } else if await nextLow.next() == nil {
                break
            }
        }
        #expect(sent == total, "the channel closed after \(sent) of \(total) bytes")
        let delivered = await waitFor(timeout: 120) { received() >= total }
        let outTook = ContinuousClock.now - out
        #expect(delivered, "Chromium received \(received()) of \(total) bytes")

        // Chromium → Revue.
        let back = ContinuousClock.now
        #expect(try peer.call(["op": "tpSend", "js": "tpSend(\(total))"])["sdp"] == "queued")
        let arrived = await waitFor(timeout: 120) { bytesIn.load(ordering: .relaxed) >= total }
        let backTook = ContinuousClock.now - back
        #expect(arrived, "Revue received \(bytesIn.load(ordering: .relaxed)) of \(total) bytes")

        // Chromium → Chromium, inside the page.
        let local = try #require(try peer.call(["op": "tpLocal", "js": "tpLocal(\(total))"])["sdp"].flatMap(Double.init))
        let localRate = Double(total) * 8 / 1e6 / (local / 1000)
        print(
            String(
                format:
                    "data channel bulk transfer, 16 MiB in 64 KiB messages: Revue→Chromium %.0f Mbit/s (%.2f s), Chromium→Revue %.0f Mbit/s (%.2f s), Chromium→Chromium %.0f Mbit/s (%.2f s)",
                rate(outTook), Double(outTook.components.seconds) + Double(outTook.components.attoseconds) / 1e18,
                rate(backTook), Double(backTook.components.seconds) + Double(backTook.components.attoseconds) / 1e18,
                localRate, local / 1000))
        #expect(local > 0)
    }
}
