import MediaBase

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why `PcapWriter` failed, shaped like swift-system's `Errno`: the C `errno` of the failing call
/// plus a message naming the file and the call.
package struct PcapWriterError: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` value of the failed system call.
    package let rawValue: Int32
    /// The file and the call that failed.
    package let message: String
    /// The value with this raw code.
    package init(rawValue: Int32) { self.rawValue = rawValue; message = "" }
    package init(_ code: Int32, _ message: String) { rawValue = code; self.message = message }
    /// Equal when the codes (raw values) are equal.
    package static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    /// Hashes what `==` compares.
    package func hash(into h: inout Hasher) { h.combine(rawValue) }
    /// A readable description, for logs and error messages.
    package var description: String { "\(message): \(String(cString: strerror(rawValue)))" }
    /// `ENOENT`: a directory of the path does not exist.
    package static let noSuchFile = PcapWriterError(rawValue: ENOENT)
    /// `EACCES`: permission denied.
    package static let permissionDenied = PcapWriterError(rawValue: EACCES)
    /// `ENOSPC`: the disk is full.
    package static let noSpace = PcapWriterError(rawValue: ENOSPC)
    /// `EBADF`: the writer was already finished.
    package static let finished = PcapWriterError(rawValue: EBADF)
}

/// An IPv4 address and UDP port written into synthesized packet headers.
package struct PcapEndpoint: Sendable, Equatable {
    /// IPv4 address in host order, e.g. `0x7F000001` for 127.0.0.1.
    package var address: UInt32
    /// UDP port.
    package var port: UInt16
    /// Makes an endpoint from four address bytes and a port.
    package init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) {
        address = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
        self.port = port
    }
    /// Makes an endpoint from a host-order address and a port.
    package init(address: UInt32, port: UInt16) { self.address = address; self.port = port }
}

/// Writes UDP datagrams (plain or SRTP/SRTCP RTP traffic) to a classic libpcap file (the
/// tcpdump.org "pcap" format, magic a1b2c3d4, microsecond timestamps) that tshark and Wireshark
/// read, synthesizing Ethernet (LINKTYPE_ETHERNET = 1) or bare IPv4 (LINKTYPE_RAW = 101) and
/// UDP headers with correct lengths and checksums (RFC 791 §3.1, RFC 768).
///
/// Output goes through a 64 KiB buffer into an `AtomicFileWriter`: `finish()` flushes, fsyncs and
/// renames the capture to `path`, so readers never see a half-written one. A writer that is
/// released without `finish()` deletes its temporary file.
/// Thread rule: one thread at a time (wrap in a `Mutex` to share). Cost: one copy per datagram
/// into the buffer, a `write` syscall per 64 KiB; no allocation after `init`.
package final class PcapWriter {
    /// The link-layer header synthesized in front of each IPv4 packet.
    package enum LinkType: Sendable {
        /// LINKTYPE_ETHERNET (1): 14-byte Ethernet II header with locally administered MACs.
        case ethernet
        /// LINKTYPE_RAW (101): packets start with the IPv4 header.
        case rawIPv4

        var code: UInt32 { self == .ethernet ? 1 : 101 }
        var headerSize: Int { self == .ethernet ? 14 : 0 }
    }

    /// The final file name.
    package let path: String
    /// The link type written in the file header.
    package let linkType: LinkType
    private var file: AtomicFileWriter?
    private let buffer: UnsafeMutableRawBufferPointer
    private var used = 0
    private var ipID: UInt16 = 0
    /// Number of datagrams written so far.
    package private(set) var packetCount = 0

    private static let bufferSize = 1 << 16
    /// Largest datagram accepted (IPv4 total length limit minus headers).
    package static let maxDatagramSize = 65_535 - 20 - 8

    /// Creates the temporary file and writes the pcap global header. Throws the `errno` of
    /// `open` or `write` with a message naming the file.
    package init(path: String, linkType: LinkType = .ethernet) throws(PcapWriterError) {
        self.path = path
        self.linkType = linkType
        do { file = try AtomicFileWriter(path: path, bufferCapacity: 0) } catch {
            throw PcapWriterError(error.code, "\(error.path): \(error.step)")
        }
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 16)
        // Global header (pcap-savefile(5)): magic, version 2.4, thiszone, sigfigs, snaplen, linktype;
        // written in host (little-endian) order, which the magic number announces.
        putLE32(0xA1B2_C3D4, at: 0)
        putLE16(2, at: 4); putLE16(4, at: 6)
        putLE32(0, at: 8); putLE32(0, at: 12)
        putLE32(65_535, at: 16)
        putLE32(linkType.code, at: 20)
        used = 24
    }

    deinit {
        file?.abort()
        buffer.deallocate()
    }

    private func putLE16(_ v: UInt16, at o: Int) { buffer.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt16.self) }
    private func putLE32(_ v: UInt32, at o: Int) { buffer.storeBytes(of: v.littleEndian, toByteOffset: o, as: UInt32.self) }

    private func flush() throws(PcapWriterError) {
        guard let file else { throw PcapWriterError(EBADF, "write to finished pcap \(path)") }
        let n = used
        used = 0
        do { try file.write(buffer.baseAddress!, count: n) } catch {
            throw PcapWriterError(error.code, "\(error.path): \(error.step)")
        }
    }

    /// Appends one UDP datagram sent from `source` to `destination` at `timestampNs` (Unix-epoch
    /// nanoseconds; shown by tshark as the capture time). Traps on a datagram over
    /// `maxDatagramSize` bytes. Throws the `errno` of a failed `write`.
    package func write(
        _ datagram: UnsafeRawBufferPointer, from source: PcapEndpoint, to destination: PcapEndpoint,
        timestampNs: UInt64
    ) throws(PcapWriterError) {
        guard file != nil else { throw PcapWriterError(EBADF, "write to finished pcap \(path)") }
        precondition(datagram.count <= Self.maxDatagramSize, "datagram of \(datagram.count) bytes too large for IPv4")
        let l2 = linkType.headerSize
        let recordSize = 16 + l2 + 20 + 8 + datagram.count
        if used + recordSize > Self.bufferSize { try flush() }
        if recordSize > Self.bufferSize {
            // Oversized record: write header part through the buffer, then the payload directly.
            try writeRecord(datagram, source, destination, timestampNs, payloadInBuffer: false)
            try flush()
            try writeDirect(datagram)
        } else {
            try writeRecord(datagram, source, destination, timestampNs, payloadInBuffer: true)
        }
        packetCount += 1
    }

    private func writeDirect(_ d: UnsafeRawBufferPointer) throws(PcapWriterError) {
        guard let file else { throw PcapWriterError(EBADF, "write to finished pcap \(path)") }
        do { try file.write(d.baseAddress!, count: d.count) } catch {
            throw PcapWriterError(error.code, "\(error.path): \(error.step)")
        }
    }

    private func writeRecord(
        _ d: UnsafeRawBufferPointer, _ src: PcapEndpoint, _ dst: PcapEndpoint,
        _ ns: UInt64, payloadInBuffer: Bool
    ) throws(PcapWriterError) {
        let l2 = linkType.headerSize
        let ipLength = 20 + 8 + d.count
        let o = used
        // Record header: seconds, microseconds, captured length, original length.
        putLE32(UInt32(truncatingIfNeeded: ns / 1_000_000_000), at: o)
        putLE32(UInt32((ns % 1_000_000_000) / 1000), at: o + 4)
        putLE32(UInt32(l2 + ipLength), at: o + 8)
        putLE32(UInt32(l2 + ipLength), at: o + 12)
        var at = o + 16
        if linkType == .ethernet {
            // Locally administered unicast MACs derived from the IPv4 addresses; EtherType IPv4.
            buffer[at] = 0x02; buffer[at + 1] = 0; buffer.put32(at + 2, dst.address)
            buffer[at + 6] = 0x02; buffer[at + 7] = 0; buffer.put32(at + 8, src.address)
            buffer.put16(at + 12, 0x0800)
            at += 14
        }
        // IPv4 header, RFC 791 §3.1: version 4, IHL 5, DF, TTL 64, protocol 17 (UDP).
        let ip = at
        buffer[ip] = 0x45; buffer[ip + 1] = 0
        buffer.put16(ip + 2, UInt16(ipLength))
        buffer.put16(ip + 4, ipID); ipID &+= 1
        buffer.put16(ip + 6, 0x4000)
        buffer[ip + 8] = 64; buffer[ip + 9] = 17
        buffer.put16(ip + 10, 0)
        buffer.put32(ip + 12, src.address)
        buffer.put32(ip + 16, dst.address)
        buffer.put16(ip + 10, Self.checksum(UnsafeRawBufferPointer(rebasing: buffer[ip..<(ip + 20)]), initial: 0))
        // UDP header, RFC 768, checksum over the pseudo header + UDP header + data.
        let udp = ip + 20
        let udpLength = UInt16(8 + d.count)
        buffer.put16(udp, src.port); buffer.put16(udp + 2, dst.port)
        buffer.put16(udp + 4, udpLength); buffer.put16(udp + 6, 0)
        var sum: UInt32 =
            (src.address >> 16) + (src.address & 0xFFFF) + (dst.address >> 16) + (dst.address & 0xFFFF)
            + 17 + UInt32(udpLength)
        sum = Self.sum(UnsafeRawBufferPointer(rebasing: buffer[udp..<(udp + 8)]), sum)
        sum = Self.sum(d, sum)
        var c = Self.fold(sum)
        if c == 0 { c = 0xFFFF }  // RFC 768: a computed zero is sent as all ones
        buffer.put16(udp + 6, c)
        at = udp + 8
        used = at
        if payloadInBuffer {
            buffer.copy(d, to: at)
            used = at + d.count
        }
    }

    /// One's complement sum of 16-bit words (RFC 1071), odd length padded with zero.
    static func sum(_ b: UnsafeRawBufferPointer, _ initial: UInt32) -> UInt32 {
        var s = UInt64(initial)
        var i = 0
        while i + 1 < b.count { s += UInt64(b[i]) << 8 | UInt64(b[i + 1]); i += 2 }
        if i < b.count { s += UInt64(b[i]) << 8 }
        while s >> 32 != 0 { s = (s & 0xFFFF_FFFF) + (s >> 32) }
        return UInt32(s & 0xFFFF) + UInt32(s >> 16)
    }

    static func fold(_ s: UInt32) -> UInt16 {
        var s = s
        while s >> 16 != 0 { s = (s & 0xFFFF) + (s >> 16) }
        return ~UInt16(s)
    }

    static func checksum(_ b: UnsafeRawBufferPointer, initial: UInt32) -> UInt16 { fold(sum(b, initial)) }

    /// Flushes, fsyncs and atomically renames the temporary file to `path`. Further writes throw
    /// `finished`. Throws the `errno` of `write`, `fsync`, `close` or `rename`.
    package func finish() throws(PcapWriterError) {
        guard let file else { throw PcapWriterError(EBADF, "pcap \(path) already finished") }
        defer { self.file = nil }
        do {
            try flush()
        } catch {
            file.abort()
            throw error
        }
        do { try file.finish() } catch { throw PcapWriterError(error.code, "\(error.path): \(error.step)") }
    }
}
