#if canImport(Glibc)
    import Testing
    import Foundation
    @testable import MediaCore

    @Suite struct PcapWriterTests {
        static func tempPath(_ name: String) -> String {
            FileManager.default.temporaryDirectory.appendingPathComponent("pcapwriter-\(UUID().uuidString)-\(name)").path
        }

        /// RFC 1071 check: the one's complement sum over a block that includes its checksum is 0xFFFF.
        static func verifies(_ words: [UInt8]) -> Bool {
            var s: UInt32 = 0
            var i = 0
            while i + 1 < words.count { s += UInt32(words[i]) << 8 | UInt32(words[i + 1]); i += 2 }
            if i < words.count { s += UInt32(words[i]) << 8 }
            while s >> 16 != 0 { s = (s & 0xFFFF) + (s >> 16) }
            return s == 0xFFFF
        }

        static func le32(_ b: [UInt8], _ o: Int) -> UInt32 {
            UInt32(b[o]) | UInt32(b[o + 1]) << 8 | UInt32(b[o + 2]) << 16 | UInt32(b[o + 3]) << 24
        }

        @Test(arguments: [PcapWriter.LinkType.ethernet, .rawIPv4])
        func writesValidHeadersLengthsAndChecksums(linkType: PcapWriter.LinkType) throws {
            let path = Self.tempPath("a.pcap")
            defer { unlink(path) }
            let w = try PcapWriter(path: path, linkType: linkType)
            let src = PcapEndpoint(10, 0, 0, 1, port: 5004), dst = PcapEndpoint(10, 0, 0, 2, port: 5006)
            let datagrams: [[UInt8]] = [[0x80, 96, 0, 1], Array(repeating: 0xAB, count: 1201), [0x55]]
            for (i, d) in datagrams.enumerated() {
                try d.withUnsafeBytes {
                    try w.write($0, from: src, to: dst, timestampNs: 1_700_000_000_123_456_789 + UInt64(i) * 1_000_000)
                }
            }
            #expect(!FileManager.default.fileExists(atPath: path))  // nothing visible before finish
            try w.finish()
            #expect(w.packetCount == 3)
            let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(Self.le32(b, 0) == 0xA1B2_C3D4)
            #expect(Self.le32(b, 20) == (linkType == .ethernet ? 1 : 101))
            var at = 24
            let l2 = linkType == .ethernet ? 14 : 0
            for (i, d) in datagrams.enumerated() {
                #expect(Self.le32(b, at) == 1_700_000_000)
                #expect(Self.le32(b, at + 4) == 123_456 + UInt32(i) * 1000)
                let caplen = Int(Self.le32(b, at + 8))
                #expect(caplen == l2 + 28 + d.count)
                let pkt = Array(b[(at + 16)..<(at + 16 + caplen)])
                if linkType == .ethernet { #expect(pkt[12] == 0x08 && pkt[13] == 0x00) }
                let ip = Array(pkt[l2..<(l2 + 20)])
                #expect(ip[0] == 0x45 && ip[9] == 17)
                #expect(Int(ip[2]) << 8 | Int(ip[3]) == 28 + d.count)
                #expect(Self.verifies(ip), "IPv4 header checksum")
                let udp = Array(pkt[(l2 + 20)...])
                #expect(Int(udp[4]) << 8 | Int(udp[5]) == 8 + d.count)
                #expect(Array(udp[8...]) == d)
                // UDP checksum over pseudo header (src, dst, zero, protocol, UDP length) + segment.
                let pseudo: [UInt8] = Array(ip[12..<20]) + [0, 17, udp[4], udp[5]]
                #expect(Self.verifies(pseudo + udp), "UDP checksum")
                at += 16 + caplen
            }
            #expect(at == b.count)
        }

        @Test func largeDatagramsAndManyPacketsSpanTheBuffer() throws {
            let path = Self.tempPath("big.pcap")
            defer { unlink(path) }
            let w = try PcapWriter(path: path, linkType: .rawIPv4)
            let big = [UInt8](repeating: 7, count: PcapWriter.maxDatagramSize)
            let src = PcapEndpoint(address: 0x7F00_0001, port: 1), dst = PcapEndpoint(address: 0x7F00_0001, port: 2)
            for i in 0..<200 {
                let d = i == 100 ? big : [UInt8](repeating: UInt8(i), count: 700)
                try d.withUnsafeBytes { try w.write($0, from: src, to: dst, timestampNs: UInt64(i)) }
            }
            try w.finish()
            let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            #expect(size == 24 + 199 * (16 + 28 + 700) + (16 + 28 + big.count))
        }

        @Test func releasingWithoutFinishLeavesNoFile() throws {
            let dir = Self.tempPath("dir")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            do {
                let w = try PcapWriter(path: dir + "/x.pcap")
                try [UInt8](repeating: 1, count: 10).withUnsafeBytes {
                    try w.write(
                        $0, from: PcapEndpoint(1, 2, 3, 4, port: 5), to: PcapEndpoint(5, 6, 7, 8, port: 9), timestampNs: 0)
                }
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        }

        @Test func openFailureAndWriteAfterFinishThrow() throws {
            #expect(throws: PcapWriterError.noSuchFile) { try PcapWriter(path: "/nonexistent-dir-\(UUID().uuidString)/x.pcap") }
            let path = Self.tempPath("f.pcap")
            defer { unlink(path) }
            let w = try PcapWriter(path: path)
            try w.finish()
            #expect(throws: PcapWriterError.finished) {
                try [UInt8]([1]).withUnsafeBytes {
                    try w.write(
                        $0, from: PcapEndpoint(1, 1, 1, 1, port: 1), to: PcapEndpoint(1, 1, 1, 1, port: 1), timestampNs: 0)
                }
            }
            #expect(throws: PcapWriterError.finished) { try w.finish() }
        }
    }
#endif
