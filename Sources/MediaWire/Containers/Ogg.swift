#if canImport(Glibc)
    import Glibc
#endif

/// The Ogg page checksum (RFC 3533 §6): CRC-32 with polynomial 0x04c11db7, initial value 0, no
/// bit reflection and no final XOR, computed over the whole page with its CRC field set to zero.
/// Thread rule: pure functions. Cost: one table lookup per byte.
package enum OggCRC {
    package static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var r = UInt32(i) << 24
        for _ in 0..<8 { r = (r & 0x8000_0000) != 0 ? (r << 1) ^ 0x04C1_1DB7 : r << 1 }
        return r
    }

    /// Continues a checksum over `bytes`.
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = crc
        table.withUnsafeBufferPointer { t in
            for b in bytes { c = (c << 8) ^ t[Int(UInt8(c >> 24) ^ b)] }
        }
        return c
    }

    /// Checksum of `bytes` (a whole page whose CRC field is zero).
    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }
}

/// Header-type flags of an Ogg page (RFC 3533 §6).
public struct OggPageFlags: OptionSet, Hashable, Sendable {
    /// The header-type byte.
    public var rawValue: UInt8
    /// Flags from the header-type byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The page's first packet continues one from the previous page.
    public static let continued = OggPageFlags(rawValue: 1)
    /// First page of a logical stream.
    public static let beginningOfStream = OggPageFlags(rawValue: 2)
    /// Last page of a logical stream.
    public static let endOfStream = OggPageFlags(rawValue: 4)
}

/// Builds Ogg pages of one logical stream from whole packets and writes them (RFC 3533 §6): lacing
/// values of 255 continue a packet, a packet that does not fit is continued on the next page, and
/// each page carries the granule position of the last packet it completes (-1 if none).
/// Thread rule: one thread at a time. Cost: packets are copied once into the pending page.
package final class OggPageWriter {
    package let serial: UInt32
    private(set) var sequence: UInt32 = 0
    private let file: ContainerFileWriter
    /// Packets waiting for the next page: bytes back to back, with their sizes and granules.
    private var body: [UInt8] = []
    private var packets: [(size: Int, granule: Int64)] = []
    private(set) var pendingLacingCount = 0
    private var page: [UInt8] = []
    /// Pages written so far.
    private(set) var pagesWritten = 0

    package init(file: ContainerFileWriter, serial: UInt32) {
        self.file = file; self.serial = serial
        body.reserveCapacity(1 << 16); page.reserveCapacity(1 << 16 + 282)
    }

    package var hasPending: Bool { !packets.isEmpty }

    /// Lacing values a packet of `size` bytes needs.
    package static func lacingCount(_ size: Int) -> Int { size / 255 + 1 }

    /// Queues one packet ending at `granule`.
    package func append(_ packet: RawSpan, granule: Int64) {
        body.append(contentsOf: packet.array(0, packet.byteCount))
        packets.append((packet.byteCount, granule))
        pendingLacingCount += Self.lacingCount(packet.byteCount)
    }

    /// Writes every pending packet as one or more pages. `flags` (beginning/end of stream) go on the
    /// first/last page written; `endGranule` overrides the granule of the last page (end trimming).
    package func flush(flags: OggPageFlags = [], endGranule: Int64? = nil) throws(ContainerError) {
        if packets.isEmpty {
            if flags.contains(.endOfStream) {
                try emit(lacing: [], bodyRange: 0..<0, flags: flags, granule: endGranule ?? 0)
            }
            return
        }
        var lacing: [UInt8] = []
        lacing.reserveCapacity(255)
        var pageStart = 0, cursor = 0
        var pageGranule: Int64 = -1
        var continued = false
        var first = true
        for p in packets {
            var left = p.size
            var segmentsOfPacket = 0
            while true {
                if lacing.count == 255 {
                    var f: OggPageFlags = continued ? [.continued] : []
                    if first { f.formUnion(flags.intersection(.beginningOfStream)) }
                    try emit(lacing: lacing, bodyRange: pageStart..<cursor, flags: f, granule: pageGranule)
                    first = false
                    lacing.removeAll(keepingCapacity: true)
                    pageStart = cursor
                    pageGranule = -1
                    continued = segmentsOfPacket > 0
                }
                let seg = min(255, left)
                lacing.append(UInt8(seg))
                segmentsOfPacket += 1
                cursor += seg
                left -= seg
                if seg < 255 { pageGranule = p.granule; break }
            }
        }
        var f: OggPageFlags = continued ? [.continued] : []
        if first { f.formUnion(flags.intersection(.beginningOfStream)) }
        f.formUnion(flags.intersection(.endOfStream))
        try emit(lacing: lacing, bodyRange: pageStart..<cursor, flags: f, granule: endGranule ?? pageGranule)
        body.removeAll(keepingCapacity: true)
        packets.removeAll(keepingCapacity: true)
        pendingLacingCount = 0
    }

    private func emit(lacing: [UInt8], bodyRange: Range<Int>, flags: OggPageFlags, granule: Int64) throws(ContainerError) {
        page.removeAll(keepingCapacity: true)
        page.append(contentsOf: "OggS".utf8)
        page.append(0)
        page.append(flags.rawValue)
        page.appendU64(UInt64(bitPattern: granule), .little)
        page.appendU32(serial, .little)
        page.appendU32(sequence, .little)
        page.appendU32(0, .little)
        page.append(UInt8(lacing.count))
        page.append(contentsOf: lacing)
        page.append(contentsOf: body[bodyRange])
        let crc = OggCRC.checksum(page)
        page[22] = UInt8(crc & 0xFF); page[23] = UInt8((crc >> 8) & 0xFF)
        page[24] = UInt8((crc >> 16) & 0xFF); page[25] = UInt8(crc >> 24)
        try file.write(page)
        sequence &+= 1
        pagesWritten += 1
    }
}

/// One Ogg page as read: header fields, lacing values and body (buffers reused between pages).
package struct OggPage {
    package var flags: OggPageFlags = []
    package var granule: Int64 = 0
    package var serial: UInt32 = 0
    package var sequence: UInt32 = 0
    package var lacing: [UInt8] = []
    package var body: [UInt8] = []
    /// Offset of the page in the file.
    package var offset: Int64 = 0
    /// Index of the page in the file (all streams).
    package var index = 0

    /// An empty page, to be filled by a reader.
    package init() {}
}

/// Reads Ogg pages from a file (RFC 3533 §6): finds the `OggS` capture pattern, checks the version
/// and CRC, and hands out whole pages. In strict mode any damage throws; in tolerant mode damaged
/// pages and garbage are skipped and counted.
/// Thread rule: one thread at a time. Cost: each page is copied once from the page cache.
package final class OggPageReader {
    package let file: ContainerFileReader
    package var path: String { file.path }
    package let strict: Bool
    /// Pages whose CRC or version was wrong (tolerant mode).
    package private(set) var corruptPages = 0
    /// Bytes skipped while looking for a capture pattern (tolerant mode).
    package private(set) var skippedBytes: Int64 = 0
    private(set) var pagesRead = 0
    package var page = OggPage()
    private var header = [UInt8](repeating: 0, count: 27)

    package init(path: String, strict: Bool) throws(ContainerError) {
        file = try ContainerFileReader(path: path)
        self.strict = strict
        page.lacing.reserveCapacity(255)
        page.body.reserveCapacity(65025)
    }

    /// Reads the next page into `page`. Returns false at the end of the file.
    package func nextPage() throws(ContainerError) -> Bool {
        while true {
            // Sync: the next four bytes must be "OggS"; otherwise scan forward.
            let start = file.offset
            var window: UInt32 = 0
            var have = 0
            while true {
                guard let b = try file.readByte() else {
                    if have == 0 || (start == 0 && pagesRead == 0 && file.offset == 0) { return false }
                    if start == 0 && pagesRead == 0 {
                        throw ContainerError(.badMagic, path: path, "not an Ogg file (no OggS capture pattern)")
                    }
                    if strict {
                        throw ContainerError(
                            .truncated, path: path, "file ends with \(have) bytes that are not an Ogg page (at byte \(start))")
                    }
                    skippedBytes += Int64(have)
                    return false
                }
                window = (window << 8) | UInt32(b)
                have += 1
                if have >= 4 && window == 0x4F67_6753 { break }  // "OggS"
                if have == 4 && (strict || (start == 0 && pagesRead == 0)) {
                    if start == 0 && pagesRead == 0 {
                        throw ContainerError(.badMagic, path: path, "not an Ogg file (does not start with OggS)")
                    }
                    throw ContainerError(.malformed, path: path, "lost sync at byte \(start): no Ogg page starts there")
                }
            }
            if have > 4 { skippedBytes += Int64(have - 4) }
            let pageStart = file.offset - 4
            header[0] = 0x4F; header[1] = 0x67; header[2] = 0x67; header[3] = 0x53
            let got = try header.withUnsafeMutableBytes { b in
                Result { () throws(ContainerError) -> Int in try file.read(into: b.baseAddress! + 4, count: 23) }
            }.get()
            let index = pagesRead
            guard got == 23 else {
                if strict {
                    throw ContainerError(.truncated, path: path, "page \(index) at byte \(pageStart) is truncated (header)")
                }
                return false
            }
            let nsegs = Int(header[26])
            page.lacing.removeAll(keepingCapacity: true)
            page.lacing.append(contentsOf: repeatElement(0, count: nsegs))
            let gotLacing = try page.lacing.withUnsafeMutableBytes { b in
                Result { () throws(ContainerError) -> Int in nsegs == 0 ? 0 : try file.read(into: b.baseAddress!, count: nsegs) }
            }.get()
            guard gotLacing == nsegs else {
                if strict {
                    throw ContainerError(.truncated, path: path, "page \(index) at byte \(pageStart) is truncated (lacing)")
                }
                return false
            }
            let bodySize = page.lacing.reduce(0) { $0 + Int($1) }
            page.body.removeAll(keepingCapacity: true)
            page.body.append(contentsOf: repeatElement(0, count: bodySize))
            let gotBody = try page.body.withUnsafeMutableBytes { b in
                Result { () throws(ContainerError) -> Int in
                    bodySize == 0 ? 0 : try file.read(into: b.baseAddress!, count: bodySize)
                }
            }.get()
            guard gotBody == bodySize else {
                if strict {
                    throw ContainerError(
                        .truncated, path: path,
                        "page \(index) at byte \(pageStart) is truncated (got \(gotBody) of \(bodySize) body bytes)")
                }
                return false
            }
            pagesRead += 1
            let storedCRC = header.span.bytes.u32(22, .little)
            header[22] = 0; header[23] = 0; header[24] = 0; header[25] = 0
            var crc = header.withUnsafeBytes { OggCRC.update(0, $0) }
            crc = page.lacing.withUnsafeBytes { OggCRC.update(crc, $0) }
            crc = page.body.withUnsafeBytes { OggCRC.update(crc, $0) }
            if header[4] != 0 || crc != storedCRC {
                let what = header[4] != 0 ? "has unsupported Ogg version \(header[4])" : "has a bad CRC"
                if strict { throw ContainerError(.corrupt, path: path, "page \(index) at byte \(pageStart) \(what)") }
                corruptPages += 1
                continue
            }
            page.flags = OggPageFlags(rawValue: header[5])
            page.granule = Int64(bitPattern: header.span.bytes.u64(6, .little))
            page.serial = header.span.bytes.u32(14, .little)
            page.sequence = header.span.bytes.u32(18, .little)
            page.offset = pageStart
            page.index = index
            return true
        }
    }
}

/// Reassembles the packets of one logical stream from its pages (RFC 3533 §5-6): lacing values of
/// 255 continue a packet, possibly across pages. Packets completed on a page are collected back to
/// back in `bytes`; a page-sequence gap drops the packet that spanned it and is counted.
/// Thread rule: one thread at a time. Cost: one copy of each packet.
package struct OggPacketAssembler {
    /// Packets completed on the last page: ranges into `bytes`.
    package var packets: [Range<Int>] = []
    package var bytes: [UInt8] = []
    private var partial: [UInt8] = []
    private var hasPartial = false
    private var expectedSequence: UInt32?
    /// Pages missing from the sequence (lost or corrupt).
    package private(set) var lostPages = 0
    /// Packets dropped because a page was missing or continuation flags did not match.
    package private(set) var droppedPackets = 0
    /// Largest packet accepted; bigger ones are treated as corruption.
    package let maximumPacketSize: Int

    package init(maximumPacketSize: Int) { self.maximumPacketSize = maximumPacketSize }

    /// Whether a packet continues onto the next page.
    package var hasIncompletePacket: Bool { hasPartial }

    /// Collects the packets completed on `page` (a page of this stream). Returns false when a
    /// packet exceeds the size limit.
    package mutating func add(_ page: OggPage) -> Bool {
        packets.removeAll(keepingCapacity: true)
        bytes.removeAll(keepingCapacity: true)
        if let e = expectedSequence, page.sequence != e {
            let gap = page.sequence &- e
            if gap >= 0x8000_0000 { return true }  // an old or duplicated page: ignore it
            lostPages += Int(gap)
            if hasPartial { droppedPackets += 1 }
            hasPartial = false
            partial.removeAll(keepingCapacity: true)
        }
        expectedSequence = page.sequence &+ 1
        var skipping = false
        if page.flags.contains(.continued) {
            if !hasPartial { skipping = true }  // the start of this packet was lost
        } else if hasPartial {
            droppedPackets += 1  // a packet claimed to continue, but this page starts a new one
            hasPartial = false
            partial.removeAll(keepingCapacity: true)
        }
        var offset = 0
        var start = 0
        if hasPartial { bytes.append(contentsOf: partial) }
        partial.removeAll(keepingCapacity: true)
        hasPartial = false
        var inPacket = !bytes.isEmpty
        for l in page.lacing {
            let n = Int(l)
            if !skipping {
                bytes.append(contentsOf: page.body[offset..<(offset + n)])
                inPacket = true
                if bytes.count - start > maximumPacketSize { return false }
            }
            offset += n
            if l < 255 {
                if skipping {
                    skipping = false
                    droppedPackets += 1
                } else {
                    packets.append(start..<bytes.count)
                }
                start = bytes.count
                inPacket = false
            }
        }
        if inPacket && !skipping {
            partial.append(contentsOf: bytes[start...])
            bytes.removeSubrange(start...)
            hasPartial = true
        }
        return true
    }
}
