// The packet end of `send` and `demo`: RTP packets of one SSRC (RFC 3550 §5.1) written into one
// buffer, SRTP-protected in place (RFC 3711 §3.3, RFC 7714 §5), sent over UDP and optionally
// recorded to a pcap file; and the RTCP listener that turns a receiver's PLI/FIR into keyframes.
import MediaCore
import RevueSession
import Foundation
import Synchronization

/// Counters of one outgoing stream. Thread rule: written by the sending thread, read anywhere.
final class SendCounters: Sendable {
    let packets = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    let frames = Atomic<Int>(0)
    let keyframes = Atomic<Int>(0)
    let sendErrors = Atomic<Int>(0)
    let keyframeRequests = Atomic<Int>(0)
    let nacks = Atomic<Int>(0)
}

/// One outgoing RTP stream over a UDP socket.
/// Thread rule: `send` from one thread. Cost: per packet a header marshal, a payload copy, an SRTP
/// protect and a `sendto`; no allocation.
final class RTPOutStream {
    let ssrc: UInt32
    let payloadType: UInt8
    let clockRate: Int
    let mtu: Int
    let destination: SocketAddress
    let counters = SendCounters()
    private let socket: UDPSocket
    private let srtp: SRTPContext?
    private var header: RTPHeader
    private var sequencer: RTPSequencer
    private var buffer: [UInt8]
    private let pcap: PcapRecorder?
    /// RTP timestamp of capture time 0.
    let initialTimestamp: UInt32

    init(socket: UDPSocket, destination: SocketAddress, ssrc: UInt32, payloadType: UInt8, clockRate: Int, mtu: Int,
         key: SRTPKeyMaterial?, pcap: PcapRecorder?) throws {
        self.socket = socket
        self.destination = destination
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.clockRate = clockRate
        self.mtu = mtu
        self.pcap = pcap
        if let key {
            do { srtp = try SRTPContext(material: key, direction: .outbound) } catch {
                throw InputError(description: "cannot set up SRTP (\(key.suite)): \(error)")
            }
        } else { srtp = nil }
        header = RTPHeader(payloadType: payloadType, ssrc: ssrc)
        sequencer = RTPSequencer()
        initialTimestamp = RandomBytes.uint32()
        buffer = [UInt8](repeating: 0, count: mtu + 64)
    }

    /// The largest payload that keeps a protected packet within the MTU.
    var maxPayloadSize: Int { header.maxPayloadSize(mtu: mtu) - (srtp?.rtpOverhead ?? 0) }

    /// RTP timestamp for a media time in clock ticks since the start.
    func timestamp(ticks: Int64) -> UInt32 { initialTimestamp &+ UInt32(truncatingIfNeeded: ticks) }

    /// Sends every packet of one frame with `timestamp`; `marker` is used for audio (video marks
    /// the frame's last packet itself).
    func send<P: RTPFramePayloads>(_ payloads: P, timestamp: UInt32, marker: Bool = false) {
        header.timestamp = timestamp
        header.marker = marker
        for i in 0..<payloads.count {
            header.sequenceNumber = sequencer.next()
            buffer.withUnsafeMutableBytes { b in
                var length = payloads.writePacket(at: i, header: &header, into: b)
                if let srtp {
                    do { length = try srtp.protect(b, length: length) } catch {
                        counters.sendErrors.add(1, ordering: .relaxed)
                        return
                    }
                }
                let packet = UnsafeRawBufferPointer(rebasing: b[0..<length])
                do {
                    _ = try socket.send(packet, to: destination)
                    counters.packets.add(1, ordering: .relaxed)
                    counters.bytes.add(length, ordering: .relaxed)
                } catch {
                    counters.sendErrors.add(1, ordering: .relaxed)
                }
                pcap?.record(packet, to: destination)
            }
        }
    }
}

/// Records sent datagrams into a pcap file (shared by the streams of one sender).
final class PcapRecorder: @unchecked Sendable {
    private let writer: Locked<PcapWriter?>
    private let source: PcapEndpoint
    let path: String

    init(path: String, source: SocketAddress) throws {
        self.path = path
        do { writer = Locked(try PcapWriter(path: path)) } catch { throw InputError(description: "\(error)") }
        self.source = PcapRecorder.endpoint(source)
    }

    static func endpoint(_ a: SocketAddress) -> PcapEndpoint {
        let b = a.family == .ipv4 ? a.addressBytes : [127, 0, 0, 1]
        let ip = b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0 ? [127, 0, 0, 1] : b
        return PcapEndpoint(ip[0], ip[1], ip[2], ip[3], port: a.port)
    }

    func record(_ datagram: UnsafeRawBufferPointer, to destination: SocketAddress) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let ns = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        writer.with { w in try? w?.write(datagram, from: source, to: PcapRecorder.endpoint(destination), timestampNs: ns) }
    }

    func finish() throws {
        try writer.with { w in
            defer { w = nil }
            do { try w?.finish() } catch { throw InputError(description: "\(error)") }
        }
    }
}

/// Listens on the sender's socket for RTCP from the receiver (SRTCP with the same key): PLI and
/// FIR (RFC 4585 §6.3.1, RFC 5104 §4.3.1) set a keyframe request for the media SSRC they name;
/// NACKs (RFC 4585 §6.2.1) are counted.
final class RTCPFeedbackListener: @unchecked Sendable {
    private let receiver: UDPReceiver
    /// Atomics shared with the receiving thread.
    final class Flags: Sendable {
        let keyframeRequested = Atomic<Bool>(false)
        let packets = Atomic<Int>(0)
        let rejected = Atomic<Int>(0)
    }
    let flags = Flags()
    /// The send pipelines by SSRC: PLI/FIR and NACK go straight to them (any thread is fine).
    let targets = Locked<[UInt32: any RTPSendFeedbackTarget]>([:])

    init(socket: UDPSocket, key: SRTPKeyMaterial?, streams: [RTPOutStream]) throws {
        let srtcp: SRTPContext?
        if let key {
            do { srtcp = try SRTPContext(material: key, direction: .inbound) } catch {
                throw InputError(description: "cannot set up SRTCP: \(error)")
            }
        } else { srtcp = nil }
        let counters = Dictionary(streams.map { ($0.ssrc, $0.counters) }, uniquingKeysWith: { a, _ in a })
        let box = ScratchBuffer(2048)
        let flags = self.flags
        let targets = self.targets
        receiver = UDPReceiver(socket: socket) { datagram in
            guard datagram.bytes.count <= box.bytes.count, RTPDemultiplexer.classify(datagram.bytes) == .rtcp else { return }
            box.bytes.withUnsafeMutableBytes { b in
                b.copyMemory(from: datagram.bytes)
                var length = datagram.bytes.count
                if let srtcp {
                    do { length = try srtcp.unprotectRTCP(b, length: length) } catch {
                        flags.rejected.add(1, ordering: .relaxed)
                        return
                    }
                }
                // Walk the compound (RFC 3550 §6.1): each packet's length field is its size in
                // 32-bit words minus one. Only the feedback headers matter here: PSFB (206) FMT 1
                // PLI and FMT 4 FIR (media SSRC at bytes 8-11 / in the FCI), RTPFB (205) FMT 1 NACK.
                var at = 0
                var any = false
                while at + 12 <= length {
                    let first = b[at], type = b[at + 1]
                    let words = Int(b[at + 2]) << 8 | Int(b[at + 3])
                    let size = (words + 1) * 4
                    guard first >> 6 == 2, at + size <= length else { break }
                    let fmt = first & 0x1F
                    func u32(_ o: Int) -> UInt32 { UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3]) }
                    any = true
                    if type == 206 && fmt == 1 {
                        let media = u32(at + 8)
                        counters[media]?.keyframeRequests.add(1, ordering: .relaxed)
                        if let t = targets.with({ $0[media] }) { t.handlePictureLossIndication() } else {
                            flags.keyframeRequested.store(true, ordering: .releasing)
                        }
                    } else if type == 206 && fmt == 4 && size >= 20 {
                        let media = u32(at + 12)
                        counters[media]?.keyframeRequests.add(1, ordering: .relaxed)
                        if let t = targets.with({ $0[media] }) { t.handleFullIntraRequest() } else {
                            flags.keyframeRequested.store(true, ordering: .releasing)
                        }
                    } else if type == 205 && fmt == 1 {
                        // Generic NACK FCI (RFC 4585 §6.2.1): PID and a bitmask of the 16 after it.
                        let media = u32(at + 8)
                        counters[media]?.nacks.add(1, ordering: .relaxed)
                        if let t = targets.with({ $0[media] }) {
                            var lost: [UInt16] = []
                            var o = at + 12
                            while o + 4 <= at + size {
                                let pid = UInt16(b[o]) << 8 | UInt16(b[o + 1]), blp = UInt16(b[o + 2]) << 8 | UInt16(b[o + 3])
                                lost.append(pid)
                                for bit in 0..<16 where blp & (1 << bit) != 0 { lost.append(pid &+ UInt16(bit + 1)) }
                                o += 4
                            }
                            t.handleNack(lost)
                        }
                    } else if type == 206 && fmt == 15 && size >= 24 && b[at + 12] == 0x52 && b[at + 13] == 0x45 && b[at + 14] == 0x4D && b[at + 15] == 0x42 {
                        // REMB (draft-alvestrand-rmcat-remb): exponent and mantissa after "REMB" and the SSRC count.
                        let exp = Int(b[at + 17] >> 2), mantissa = Int(b[at + 17] & 3) << 16 | Int(b[at + 18]) << 8 | Int(b[at + 19])
                        if exp < 40 { targets.with { $0.values.forEach { $0.handleEstimatedBitrate(mantissa << exp) } } }
                    }
                    at += size
                }
                if any { flags.packets.add(1, ordering: .relaxed) } else { flags.rejected.add(1, ordering: .relaxed) }
            }
        }
    }

    func start() { receiver.start() }
    func stop() { receiver.stop() }

    /// True once after a PLI/FIR arrived.
    func takeKeyframeRequest() -> Bool { flags.keyframeRequested.exchange(false, ordering: .acquiring) }
}

/// A byte buffer owned by one receiving thread (the closure that captures it).
final class ScratchBuffer: @unchecked Sendable {
    var bytes: [UInt8]
    init(_ count: Int) { bytes = [UInt8](repeating: 0, count: count) }
}

/// A value behind an `NSLock`, for state several threads touch off the hot path.
final class Locked<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func with<R>(_ body: (inout T) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
