import MediaCore
import Testing

@Suite struct OggTests {
    @Test func crcMatchesTheCatalogueCheckValue() {
        // CRC-32 poly 0x04c11db7, init 0, no reflection, no xorout: CRC-32/POSIX without its final
        // XOR, so the check value of "123456789" is 0x765E7680 ^ 0xFFFFFFFF.
        #expect(OggCRC.checksum(Array("123456789".utf8)) == 0x89A1_897F)
        #expect(OggCRC.checksum([]) == 0)
    }

    @Test func crcMatchesAPageWrittenByOpusenc() throws {
        // The first page (OpusHead) of a file opusenc 0.2 wrote: serial 0x243e1211, CRC 0x12e8c300.
        var page: [UInt8] = [
            0x4f, 0x67, 0x67, 0x53, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x11, 0x12, 0x3e, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc3,
            0xe8, 0x12, 0x01, 0x13, 0x4f, 0x70, 0x75, 0x73, 0x48, 0x65, 0x61, 0x64,
            0x01, 0x02, 0x38, 0x01, 0x80, 0xbb, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]
        let dir = ContainerTempDir(); defer { dir.remove() }
        let reader = try OggPageReader(path: dir.write("h.opus", page), strict: true)
        #expect(try reader.nextPage())
        #expect(reader.page.serial == 0x243E_1211 && reader.page.flags == [.beginningOfStream])
        let head = try OggOpusHead.parse(reader.page.body[...], path: "h.opus")
        #expect(head == OggOpusHead(channelCount: 2, preSkip: 312, inputSampleRate: 48_000, outputGain: 0))
        page[22] = 0; page[23] = 0; page[24] = 0; page[25] = 0
        #expect(OggCRC.checksum(page) == 0x12E8_C300)
    }

    /// Writes `sizes` packets through the page writer and reads them back with the page reader and
    /// assembler; returns the packets and the page lacing counts.
    func roundTrip(_ sizes: [Int], dir: ContainerTempDir) throws -> (packets: [[UInt8]], pages: [OggPage]) {
        let path = dir.file("p.ogg")
        let file = try ContainerFileWriter(path: path)
        let w = OggPageWriter(file: file, serial: 0x1234_5678)
        for (i, n) in sizes.enumerated() {
            let p = (0..<n).map { UInt8(truncatingIfNeeded: $0 &+ i) }
            w.append(p.span.bytes, granule: Int64(i + 1) * 100)
        }
        try w.flush(flags: [.beginningOfStream, .endOfStream])
        try file.finish()
        let r = try OggPageReader(path: path, strict: true)
        var a = OggPacketAssembler(maximumPacketSize: 1 << 20)
        var packets: [[UInt8]] = []
        var pages: [OggPage] = []
        while try r.nextPage() {
            pages.append(r.page)
            let ok = a.add(r.page); #expect(ok)
            for range in a.packets { packets.append(Array(a.bytes[range])) }
        }
        return (packets, pages)
    }

    @Test func packetsSpanPagesWithContinuationFlags() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        // 255 and 510 bytes end in a zero lacing value; 70 000 bytes need three pages.
        let sizes = [0, 1, 254, 255, 510, 70_000, 3]
        let (packets, pages) = try roundTrip(sizes, dir: dir)
        #expect(packets.map(\.count) == sizes)
        for (i, p) in packets.enumerated() { #expect(p == (0..<sizes[i]).map { UInt8(truncatingIfNeeded: $0 &+ i) }) }
        #expect(pages.count == 2)
        #expect(pages[0].flags == [.beginningOfStream])
        #expect(pages[0].lacing.count == 255)
        #expect(pages[1].flags == [.continued, .endOfStream])
        // The last page completes the 70 000-byte packet and the 3-byte one: granule of the latter.
        #expect(pages[1].granule == 700)
        #expect(pages.map(\.sequence) == [0, 1])
        #expect(pages.allSatisfy { $0.serial == 0x1234_5678 })
    }

    @Test func pageWithoutCompletedPacketHasGranuleMinusOne() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let (packets, pages) = try roundTrip([255 * 600], dir: dir)
        #expect(packets.map(\.count) == [255 * 600])
        #expect(pages.count == 3)
        #expect(pages.map(\.granule) == [-1, -1, 100])
        #expect(pages.map(\.flags) == [[.beginningOfStream], [.continued], [.continued, .endOfStream]])
        // 600 * 255 bytes need 600 lacing values of 255 and a terminating 0: 255 + 255 + 91.
        #expect(pages.last!.lacing == [UInt8](repeating: 255, count: 90) + [0])
    }

    @Test func assemblerDropsPacketSpanningALostPage() {
        var a = OggPacketAssembler(maximumPacketSize: 1 << 20)
        var p = OggPage()
        p.sequence = 0; p.lacing = [2, 255]; p.body = [1, 2] + [UInt8](repeating: 7, count: 255)
        let added = a.add(p); #expect(added)
        #expect(a.packets.count == 1 && a.hasIncompletePacket)
        // Sequence 1 is lost; page 2 continues a packet whose start we no longer have.
        p.sequence = 2; p.flags = [.continued]; p.lacing = [10, 3]; p.body = [UInt8](repeating: 8, count: 10) + [4, 5, 6]
        let added2 = a.add(p); #expect(added2)
        #expect(a.packets.count == 1 && Array(a.bytes[a.packets[0]]) == [4, 5, 6])
        #expect(a.lostPages == 1 && a.droppedPackets == 2)
    }

    @Test func assemblerIgnoresDuplicatedPages() {
        var a = OggPacketAssembler(maximumPacketSize: 1 << 20)
        var p = OggPage()
        p.sequence = 5; p.lacing = [1]; p.body = [9]
        _ = a.add(p)
        p.sequence = 6; p.body = [10]
        _ = a.add(p)
        p.sequence = 5; p.body = [9]  // sent again
        _ = a.add(p)
        #expect(a.packets.isEmpty && a.lostPages == 0)
        p.sequence = 7; p.body = [11]
        _ = a.add(p)
        #expect(a.packets.count == 1 && a.bytes == [11] && a.lostPages == 0)
    }

    @Test func assemblerRejectsOversizedPackets() {
        var a = OggPacketAssembler(maximumPacketSize: 300)
        var p = OggPage()
        p.lacing = [255, 255]; p.body = [UInt8](repeating: 0, count: 510)
        let added = a.add(p); #expect(!added)
    }

    @Test func readerFindsCorruptPagesStrictlyOrTolerantly() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        _ = try roundTrip([10, 20], dir: dir)
        var bytes = dir.read("p.ogg")
        bytes += bytes  // a second copy of the page (a different stream position, same serial)
        bytes[30] ^= 0xFF  // damage the first page's body
        let path = dir.write("bad.ogg", bytes)
        let strict = try OggPageReader(path: path, strict: true)
        let e = containerError { _ = try strict.nextPage() }
        #expect(e?.kind == .corrupt)
        #expect(e?.description == "\(path): page 0 at byte 0 has a bad CRC")
        let tolerant = try OggPageReader(path: path, strict: false)
        #expect(try tolerant.nextPage())
        #expect(tolerant.corruptPages == 1 && tolerant.page.offset == Int64(bytes.count / 2))
        #expect(try !tolerant.nextPage())
    }

    @Test func readerResynchronisesAfterGarbageWhenTolerant() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        _ = try roundTrip([10], dir: dir)
        let page = dir.read("p.ogg")
        let path = dir.write("g.ogg", page + Array("garbage!".utf8) + page)
        let tolerant = try OggPageReader(path: path, strict: false)
        #expect(try tolerant.nextPage())
        #expect(try tolerant.nextPage())
        #expect(tolerant.skippedBytes == 8)
        let strict = try OggPageReader(path: path, strict: true)
        #expect(try strict.nextPage())
        let e = containerError { _ = try strict.nextPage() }
        #expect(e?.message == "lost sync at byte \(page.count): no Ogg page starts there")
    }
}
