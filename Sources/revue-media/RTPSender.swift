// The packet end of `send` and `demo`: what the sender keeps of each outgoing stream, the pcap
// endpoints of its addresses, and the RTCP listener that turns a receiver's PLI/FIR into keyframes.
// Packets themselves are made, protected and sent by the engine's send pipelines.
import MediaCore
import RevueCommandLine
import RevueSession
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `send` and `demo` report of one outgoing stream (copied from the engine's statistics; not
/// the engine's own `SendCounters`). Thread rule: written by the sending thread, read anywhere.
final class OutStreamCounters: Sendable {
    let packets = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    let frames = Atomic<Int>(0)
    let keyframes = Atomic<Int>(0)
    let sendErrors = Atomic<Int>(0)
    let keyframeRequests = Atomic<Int>(0)
    let nacks = Atomic<Int>(0)
}

/// What the sender knows of one outgoing RTP stream: its SSRC, payload type and destination, and
/// the counters the commands report (filled from the send pipeline's statistics).
/// Thread rule: immutable but for the atomic counters. Cost: none.
final class RTPOutStream: Sendable {
    let ssrc: UInt32
    let payloadType: UInt8
    let destination: SocketAddress
    let counters = OutStreamCounters()

    init(destination: SocketAddress, ssrc: UInt32, payloadType: UInt8) {
        self.destination = destination
        self.ssrc = ssrc
        self.payloadType = payloadType
    }
}

extension PcapEndpoint {
    /// The pcap endpoint of a socket address: IPv4 as is; IPv6 and the wildcard address as
    /// 127.0.0.1 (the capture synthesizes IPv4 headers).
    init(_ a: SocketAddress) {
        let b = a.family == .ipv4 ? a.addressBytes : [127, 0, 0, 1]
        let ip = b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0 ? [127, 0, 0, 1] : b
        self.init(ip[0], ip[1], ip[2], ip[3], port: a.port)
    }
}

/// Listens on the sender's socket for RTCP from the receiver (SRTCP with the same key): PLI and
/// FIR (RFC 4585 §6.3.1, RFC 5104 §4.3.1) set a keyframe request for the media SSRC they name;
/// NACKs (RFC 4585 §6.2.1) are counted.
final class RTCPFeedbackListener: Sendable {
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
        } else {
            srtcp = nil
        }
        let counters = Dictionary(streams.map { ($0.ssrc, $0.counters) }, uniquingKeysWith: { a, _ in a })
        let box = ScratchBuffer(2048)
        let flags = self.flags
        let targets = self.targets
        receiver = UDPReceiver(socket: socket) { datagram in
            guard datagram.bytes.count <= box.bytes.count, RTPDemultiplexer.classify(datagram.bytes.bytes) == .rtcp else {
                return
            }
            box.bytes.withUnsafeMutableBytes { b in
                b.copyMemory(from: datagram.bytes)
                var length = datagram.bytes.count
                if let srtcp {
                    var bSpan = b.mutableBytes
                    do { length = try srtcp.unprotectRTCP(&bSpan, length: length) } catch {
                        flags.rejected.add(1, ordering: .relaxed)
                        return
                    }
                }
                // The engine's RTCP parser (RFC 3550 §6.1 compound); only the feedback matters here:
                // PLI (RFC 4585 §6.3.1), FIR (RFC 5104 §4.3.1), generic NACK (RFC 4585 §6.2.1), REMB.
                guard let packets = try? RTCPCompound.parse(b.bytes.extracting(0..<length)) else {
                    flags.rejected.add(1, ordering: .relaxed)
                    return
                }
                let any = !packets.isEmpty
                func keyframe(_ media: UInt32, full: Bool) {
                    counters[media]?.keyframeRequests.add(1, ordering: .relaxed)
                    if let t = targets.withLock({ $0[media] }) {
                        if full { t.handleFullIntraRequest() } else { t.handlePictureLossIndication() }
                    } else {
                        flags.keyframeRequested.store(true, ordering: .releasing)
                    }
                }
                for packet in packets {
                    switch packet {
                    case .pictureLossIndication(let pli):
                        keyframe(pli.mediaSSRC, full: false)
                    case .fullIntraRequest(let fir):
                        for entry in fir.entries { keyframe(entry.ssrc, full: true) }
                    case .genericNack(let nack):
                        counters[nack.mediaSSRC]?.nacks.add(1, ordering: .relaxed)
                        if let t = targets.withLock({ $0[nack.mediaSSRC] }) {
                            var lost: [UInt16] = []
                            for pair in nack.pairs {
                                lost.append(pair.packetID)
                                for bit in 0..<16 where pair.lostBitmask & (1 << bit) != 0 {
                                    lost.append(pair.packetID &+ UInt16(bit + 1))
                                }
                            }
                            t.handleNack(lost)
                        }
                    case .receiverEstimatedMaxBitrate(let remb):
                        let bitrate = Int(clamping: remb.bitrate)
                        targets.withLock {
                            for target in $0.values { target.handleEstimatedBitrate(bitrate) }
                        }
                    default:
                        break
                    }
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

/// Sends RTCP sender reports (RFC 3550 §6.4.1) with an SDES CNAME for the send pipelines, one
/// compound per destination, at the RFC's randomised interval (0.5 to 1.5 times 500 ms). They map
/// each stream's RTP timestamps to the wall clock, which a receiver needs to play audio and video
/// in sync (RFC 3550 §6.4.1, "NTP timestamp").
/// Thread rule: `sendDue(now:)` from the one sending thread. Cost: a few small arrays per report.
final class SenderReporter {
    private let socket: UDPSocket
    private let srtcp: SRTPContext?
    private let cname: String
    /// The streams by destination, in the order given.
    private let groups: [(destination: SocketAddress, targets: [any RTPSendFeedbackTarget])]
    private var schedule = RTCPReportSchedule(intervalMilliseconds: 500)
    private var buffer = [UInt8](repeating: 0, count: 1500)
    /// Compound packets sent.
    private(set) var sent = 0

    init(
        socket: UDPSocket, key: SRTPKeyMaterial?, cname: String,
        streams: [(destination: SocketAddress, target: any RTPSendFeedbackTarget)]
    ) throws {
        self.socket = socket
        self.cname = cname
        if let key {
            do { srtcp = try SRTPContext(material: key, direction: .outbound) } catch {
                throw InputError(description: "cannot set up SRTCP: \(error)")
            }
        } else {
            srtcp = nil
        }
        var groups: [(destination: SocketAddress, targets: [any RTPSendFeedbackTarget])] = []
        for s in streams {
            if let i = groups.firstIndex(where: { $0.destination == s.destination }) {
                groups[i].targets.append(s.target)
            } else {
                groups.append((s.destination, [s.target]))
            }
        }
        self.groups = groups
    }

    /// Sends the reports when they are due at `now` (the first at once).
    func sendDue(now: MonotonicTime) {
        guard schedule.isDue(now: now) else { return }
        let ntp = NTPTime.wallClock()
        for group in groups {
            // A stream that has sent nothing has no timestamp to map yet.
            let targets = group.targets.filter { $0.senderInfo.packetCount > 0 }
            let reports = RTCPSenderSession.senderReports(for: targets, ntpTime: ntp, now: now)
            let sent = buffer.withUnsafeMutableBytes { b -> Bool in
                guard let size = RTCPSenderSession.writeSenderReportCompound(reports, cname: cname, protectedBy: srtcp, into: b)
                else { return false }
                return (try? socket.send(UnsafeRawBufferPointer(rebasing: b[0..<size]), to: group.destination)) != nil
            }
            if sent { self.sent += 1 }
        }
    }
}

/// A byte buffer owned by one receiving thread (the closure that captures it).
/// Sendable: `bytes` is used only by the one UDP receiver thread whose handler captures the buffer.
final class ScratchBuffer: @unchecked Sendable {
    var bytes: [UInt8]
    init(_ count: Int) { bytes = [UInt8](repeating: 0, count: count) }
}
