// The data channel layer of a PeerConnection against a hostile SCTP peer: a bare usrsctp
// association of the test's (no DCEP of its own) linked to ours in memory, which sends opens on
// our parity, an open whose lengths run past its end, an open with a 9,000-byte label (over the
// 8 KiB bound), data on streams nobody opened, an ACK
// nobody asked for, an unknown PPID, a second open of a stream in use and a 300 KiB message over
// our 256 KiB limit. Each is dropped and counted; the one proper open gets its ACK and its
// channel keeps working after all of it.
import Dispatch
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct DataChannelHostilePeerTests {
    /// The test's raw SCTP peer: every call on `queue`; what it receives is kept.
    final class RawPeer: @unchecked Sendable {
        let queue = DispatchQueue(label: "raw-sctp-peer")
        var association: SCTPAssociation!
        let events = Mutex<[String]>([])
        let up = Atomic<Bool>(false)

        func drain() {
            while true {
                switch association.receive() {
                case .none: return
                case .up: up.store(true, ordering: .relaxed)
                case .data(let stream, let ppid, let length, _):
                    let first = length > 0 ? association.buffer[0] : 0
                    events.withLock { $0.append("data \(stream) \(ppid) \(length) \(first)") }
                case .down:
                    events.withLock { $0.append("down") }
                    return
                case .streamsReset(let ids): events.withLock { $0.append("reset \(ids)") }
                case .other: break
                }
            }
        }

        func send(stream: UInt16, ppid: UInt32, _ bytes: [UInt8]) {
            queue.sync {
                let r = bytes.withUnsafeBytes {
                    association.send(stream: stream, ppid: ppid, unordered: false, reliability: .reliable, $0)
                }
                precondition(r == .sent, "the raw peer could not send: \(r)")
            }
        }
    }

    /// Polls `condition` every 10 ms until it holds or `seconds` pass; whether it held.
    func settled(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return true
    }

    static func open(label: String, labelLengthBonus: Int = 0) -> [UInt8] {
        let l = Array(label.utf8)
        let n = l.count + labelLengthBonus
        return [0x03, 0x00, 0, 0, 0, 0, 0, 0, UInt8(n >> 8), UInt8(n & 0xFF), 0, 0] + l
    }

    @Test func hostileSCTPPeerIsDroppedAndCounted() async throws {
        let queue = DispatchQueue(label: "revue-side")
        let key = DispatchSpecificKey<UInt8>()
        queue.setSpecific(key: key, value: 1)
        let ours = PeerConnectionDataChannels(queue: queue, queueKey: key)
        let peer = RawPeer()
        let opened = Mutex<[DataChannel]>([])
        let messages = Mutex<[DataChannelMessage]>([])
        ours.shared.withLock {
            $0.onDataChannel = { channel in
                opened.withLock { $0.append(channel) }
                channel.onMessage = { m in messages.withLock { $0.append(m) } }
            }
        }
        // The raw peer's packets go to ours on our queue; ours go to it on its queue.
        let callbacks = SCTPCallbacks(
            output: { packet in
                let copy = Array(packet)
                queue.async { copy.withUnsafeBytes { ours.input($0) } }
            },
            upcall: { peer.queue.async { peer.drain() } })
        peer.association = try SCTPAssociation(
            localPort: 5000, mtu: 1130, streams: 1024, bufferBytes: 1 << 20, receiveBufferBytes: 65_536, callbacks: callbacks)
        // The raw peer opens first; its INIT reaches us before we have an association and is
        // dropped, so the association comes up when ours meets it (as between two browsers).
        peer.queue.sync { #expect(peer.association.connect(remotePort: 5000)) }
        var failure: String?
        queue.sync {
            failure = ours.start(role: .active, remotePort: 5000, remoteMaxMessageSize: 65_536) { packet in
                let copy = Array(packet)
                peer.queue.async {
                    copy.withUnsafeBytes { peer.association.input($0) }
                    peer.drain()
                }
            }
        }
        #expect(failure == nil)
        #expect(await settled(within: 10) { peer.up.load(ordering: .relaxed) && queue.sync { ours.queued.up } })

        // We are the DTLS client: our ids are even, the peer's odd.
        peer.send(stream: 2, ppid: 50, Self.open(label: "our parity"))
        peer.send(stream: 3, ppid: 50, Self.open(label: "short", labelLengthBonus: 40))
        peer.send(stream: 5, ppid: 51, Array("nobody opened this".utf8))
        peer.send(stream: 7, ppid: 50, [0x02])
        peer.send(stream: 9, ppid: 50, Self.open(label: String(repeating: "l", count: 9000)))
        peer.send(stream: 1, ppid: 50, Self.open(label: "ok"))
        peer.send(stream: 1, ppid: 99, [1, 2, 3])
        peer.send(stream: 1, ppid: 53, [UInt8](repeating: 7, count: 300 * 1024))
        peer.send(stream: 1, ppid: 50, Self.open(label: "again"))
        peer.send(stream: 1, ppid: 51, Array("after".utf8))

        #expect(await settled(within: 10) { messages.withLock { $0.count } >= 1 })
        let s = ours.shared.withLock { $0.statistics }
        #expect(s.peerOpensRefused == 3, "\(s)")
        #expect(s.malformedControlDropped == 2, "\(s)")
        #expect(s.messagesWithoutChannelDropped == 1, "\(s)")
        #expect(s.unknownPPIDDropped == 1, "\(s)")
        #expect(s.messagesTooLargeDropped == 1, "\(s)")
        #expect(s.channelsOpenedByPeer == 1 && s.messagesReceived == 1)
        #expect(opened.withLock { $0.map(\.label) } == ["ok"])
        #expect(messages.withLock { $0 } == [.text("after")])
        // The one proper open was acknowledged: DCEP PPID 50, one byte 0x02, on stream 1.
        #expect(await settled(within: 5) { peer.events.withLock { $0.contains("data 1 50 1 2") } })
        #expect(peer.events.withLock { $0.filter { $0.hasPrefix("data") } } == ["data 1 50 1 2"])
        queue.sync { ours.shutdown() }
        #expect(opened.withLock { $0.first?.readyState } == .closed)
        peer.queue.sync { peer.association = nil }
    }
}
