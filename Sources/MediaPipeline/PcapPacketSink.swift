import MediaBase
import MediaTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A `PacketSink` that records every packet (plain RTP or SRTP, as the stream sends it) as a UDP
/// datagram from `source` to `destination` in a pcap file that tshark and Wireshark read, stamped
/// with the wall-clock time it was written. Write errors are counted, never thrown at the pipeline.
///
/// Thread rule: `write`/`flush` from the pipeline threads (a mutex lets an audio and a video
/// stream share one file); `finish` once, after the streams stopped. Cost: one copy per packet
/// into the writer's 64 KiB buffer, a `write` syscall per 64 KiB; no allocation after `init`.
/// Sendable: the writer lives in a `Locked` box (its `Mutex`), the counters are atomics, the rest
/// are `let`s.
package final class PcapPacketSink: PacketSink, @unchecked Sendable {
    /// The writer, nil after `finish`. A `Locked` box rather than a bare `Mutex`: `write` hands the
    /// caller's packet buffer to the writer inside the lock.
    private let writer: Locked<PcapWriter?>
    private let failures = Atomic<Int>(0)
    private let written = Atomic<Int>(0)
    /// Endpoint written as the source of each record's IPv4/UDP headers.
    package let source: PcapEndpoint
    /// Endpoint written as the destination of each record's IPv4/UDP headers.
    package let destination: PcapEndpoint
    /// The capture file (complete after `finish`).
    package let path: String

    /// Creates the capture at `path` (written to a temporary name until `finish`).
    package init(
        path: String, source: PcapEndpoint = PcapEndpoint(192, 0, 2, 1, port: 40_000),
        destination: PcapEndpoint = PcapEndpoint(192, 0, 2, 2, port: 50_000),
        linkType: PcapWriter.LinkType = .ethernet
    ) throws(PcapWriterError) {
        self.path = path
        self.source = source
        self.destination = destination
        writer = Locked(try PcapWriter(path: path, linkType: linkType))
    }

    /// Appends `packet` as one UDP datagram from `source` to `destination`, stamped with the current time. Sending threads; serialized inside.
    package func write(_ packet: RawSpan) { packet.withUnsafeBytes { write($0, to: destination) } }

    /// Appends `packet` as one UDP datagram from `source` to another destination: for one file
    /// shared by streams sent to different ports. Sending threads; serialized inside.
    package func write(_ packet: UnsafeRawBufferPointer, to destination: PcapEndpoint) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
        let ok: Bool = writer.withLock { writer in
            guard let w = writer else { return false }
            do { try w.write(packet, from: source, to: destination, timestampNs: now) } catch { return false }
            return true
        }
        if ok { written.add(1, ordering: .relaxed) } else { failures.add(1, ordering: .relaxed) }
    }

    /// Records are buffered by the writer; nothing to do per frame.
    package func flush() {}

    /// Writes the rest and renames the file into place. Later writes are counted as failures.
    package func finish() throws(PcapWriterError) {
        try writer.withLock { (writer) throws(PcapWriterError) in
            guard let w = writer else { throw PcapWriterError(EBADF, "pcap \(path) already finished") }
            writer = nil
            try w.finish()
        }
    }

    /// Packets recorded.
    package var packetCount: Int { written.load(ordering: .relaxed) }
    /// Packets that could not be recorded (I/O error, or after `finish`).
    package var failureCount: Int { failures.load(ordering: .relaxed) }
}
