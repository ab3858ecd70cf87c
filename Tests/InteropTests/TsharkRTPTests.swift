#if canImport(Glibc)
    import Testing
    import Foundation
    import MediaCore

    /// Runs tshark on pcap files written by `PcapWriter` and returns its standard output.
    enum Tshark {
        static let path = "/usr/bin/tshark"
        static var available: Bool { FileManager.default.isExecutableFile(atPath: path) }

        static func run(_ args: [String]) throws -> String {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = args
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }

        /// `-T fields` output: one row per packet, one column per field (tab separated).
        static func fields(_ file: String, decode: [String], _ names: [String], extra: [String] = []) throws -> [[String]] {
            var args = ["-n", "-r", file]
            for d in decode { args += ["-d", d] }
            args += extra + ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"]
            for n in names { args += ["-e", n] }
            return try run(args).split(separator: "\n", omittingEmptySubsequences: true)
                .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        }

        /// Full `-V` dissection with IPv4 and UDP checksum verification on.
        static func verbose(_ file: String, decode: [String]) throws -> String {
            var args = ["-n", "-r", file, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-V"]
            for d in decode { args += ["-d", d] }
            return try run(args)
        }

        /// Writes datagrams to a temporary pcap and returns its path (caller removes the directory).
        static func capture(_ datagrams: [[UInt8]], port: UInt16, linkType: PcapWriter.LinkType = .ethernet) throws -> (
            dir: URL, file: String
        ) {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tshark-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let file = dir.appendingPathComponent("capture.pcap").path
            let w = try PcapWriter(path: file, linkType: linkType)
            for (i, d) in datagrams.enumerated() {
                try d.withUnsafeBytes {
                    try w.write(
                        $0, from: PcapEndpoint(192, 0, 2, 1, port: 40_000), to: PcapEndpoint(192, 0, 2, 2, port: port),
                        timestampNs: 1_764_000_000_000_000_000 + UInt64(i) * 5_000_000)
                }
            }
            try w.finish()
            return (dir, file)
        }

        /// Lines of a `-V` dissection that signal a problem: malformed packets, expert warnings or
        /// errors, bad checksums.
        static func problems(_ verbose: String) -> [Substring] {
            verbose.split(separator: "\n").filter {
                $0.contains("Malformed") || $0.contains("Checksum Status: Bad") || $0.contains("Severity level: Warning")
                    || $0.contains("Severity level: Error") || $0.contains("Expert Info (Warning")
                    || $0.contains("Expert Info (Error")
            }
        }
    }

    @Suite(.enabled(if: Tshark.available, "tshark not installed"))
    struct TsharkRTPTests {
        struct Sent {
            var seq: UInt16; var ts: UInt32; var marker: Bool; var pt: UInt8; var ssrc: UInt32; var padding: Int
            var csrcs: Int; var extIDs: [UInt8]
        }

        /// VP8 key frame bytes: RFC 7741 §4.3 payload header (P=0, show) and RFC 6386 §9.1 start code, 320x240.
        static func vp8Frame(size: Int, key: Bool) -> [UInt8] {
            var f = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let head: [UInt8] = key ? [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00] : [0x31, 0x00, 0x00]
            for (i, b) in head.enumerated() where i < f.count { f[i] = b }
            return f
        }

        /// A VP8 stream over the sequence rollover with header extensions, some padding and CSRCs.
        static func makeStream() -> ([[UInt8]], [Sent]) {
            var seq = RTPSequencer(initial: 65_520)
            var clock = RTPClock(rate: RTPClock.videoRate, initialTimestamp: UInt32.max - 6000)
            var vp8 = VP8Packetizer(pictureID: 0x7FFD)
            var header = RTPHeader(payloadType: 96, ssrc: 0xDEAD_BEEF)
            let map = RTPExtensionMap()
            var datagrams: [[UInt8]] = [], sent: [Sent] = []
            var buf = [UInt8](repeating: 0, count: 1500)
            for frameIndex in 0..<8 {
                let frame = vp8Frame(size: [5000, 900, 1500, 40, 3000, 1, 2400, 700][frameIndex], key: frameIndex == 0)
                header.timestamp = clock.timestamp(captureNs: Int64(frameIndex) * 33_333_333)
                header.extensions = RTPHeaderExtensions()
                header.extensions.setAbsSendTime(
                    RTPAbsSendTime(nanoseconds: UInt64(frameIndex) * 33_333_333), id: map.absSendTime!)
                if frameIndex % 2 == 1 {
                    header.extensions.setTransportSequenceNumber(UInt16(frameIndex), id: map.transportSequenceNumber!)
                }
                header.csrcs = frameIndex == 3 ? [1, 2, 3] : []
                frame.withUnsafeBytes { raw in
                    let plan = vp8.packetize(frameSize: raw.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200) - 8)
                    for i in 0..<plan.count {
                        header.sequenceNumber = seq.next()
                        let padding = frameIndex == 5 ? 8 : 0
                        var n = buf.withUnsafeMutableBytes {
                            $0.appending { plan.writePacket(at: i, header: &header, of: raw.bytes, into: &$0) }
                        }
                        if padding > 0 {
                            // Re-marshal with RFC 3550 padding through RTPPacket.marshal.
                            var payload = [UInt8](repeating: 0, count: plan.payloadSize(at: i))
                            _ = payload.withUnsafeMutableBytes {
                                $0.appending { plan.writePayload(at: i, of: raw.bytes, into: &$0) }
                            }
                            n = buf.withUnsafeMutableBytes {
                                $0.appending {
                                    RTPPacket.marshal(
                                        header: header, payload: payload.span.bytes, paddingSize: padding, into: &$0)
                                }
                            }
                        }
                        datagrams.append(Array(buf[0..<n]))
                        sent.append(
                            Sent(
                                seq: header.sequenceNumber, ts: header.timestamp, marker: header.marker, pt: 96,
                                ssrc: header.ssrc, padding: padding, csrcs: header.csrcs.count,
                                extIDs: header.extensions.elementIDs))
                    }
                }
            }
            return (datagrams, sent)
        }

        @Test(arguments: [PcapWriter.LinkType.ethernet, .rawIPv4])
        func headerFieldsMatchTshark(linkType: PcapWriter.LinkType) throws {
            let (datagrams, sent) = Self.makeStream()
            #expect(sent.contains { $0.seq == 65535 } && sent.contains { $0.seq == 0 })
            let (dir, file) = try Tshark.capture(datagrams, port: 5006, linkType: linkType)
            defer { try? FileManager.default.removeItem(at: dir) }
            let rows = try Tshark.fields(
                file, decode: ["udp.port==5006,rtp"],
                [
                    "rtp.seq", "rtp.timestamp", "rtp.marker", "rtp.p_type", "rtp.ssrc", "rtp.padding.count",
                    "rtp.csrc.item", "rtp.ext.rfc5285.id", "udp.length", "ip.len",
                ])
            try #require(rows.count == sent.count)
            for (r, s) in zip(rows, sent) {
                #expect(r[0] == "\(s.seq)")
                #expect(r[1] == "\(s.ts)")
                #expect(r[2] == (s.marker ? "1" : "0") || r[2] == (s.marker ? "True" : "False"))
                #expect(r[3] == "\(s.pt)")
                #expect(r[4] == "0xdeadbeef")
                #expect(r[5] == (s.padding > 0 ? "\(s.padding)" : ""))
                #expect(r[6].split(separator: ",").count == s.csrcs)
                #expect(r[7] == s.extIDs.map(String.init).joined(separator: ","))
            }
            for (r, d) in zip(rows, datagrams) {
                #expect(r[8] == "\(d.count + 8)")
                #expect(r[9] == "\(d.count + 28)")
            }
            let problems = Tshark.problems(try Tshark.verbose(file, decode: ["udp.port==5006,rtp"]))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
        }

        @Test func vp8DescriptorFieldsMatchTshark() throws {
            var vp8 = VP8Packetizer(pictureID: 0x7FFF)
            var header = RTPHeader(payloadType: 96, timestamp: 1234, ssrc: 42)
            var seq = RTPSequencer(initial: 100)
            var datagrams: [[UInt8]] = []
            var expected: [(s: Bool, pid: UInt16, tl0: UInt8?, tid: UInt8?, key: Bool?)] = []
            var buf = [UInt8](repeating: 0, count: 1500)
            for f in 0..<3 {
                let frame = Self.vp8Frame(size: 2500, key: f == 0)
                let layer: VP8Packetizer.TemporalLayer? = f == 2 ? .init(id: 1, layerSync: true, tl0PicIdx: 9) : nil
                header.timestamp &+= 3000
                frame.withUnsafeBytes { raw in
                    let plan = vp8.packetize(
                        frameSize: raw.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200), temporalLayer: layer)
                    for i in 0..<plan.count {
                        header.sequenceNumber = seq.next()
                        let n = buf.withUnsafeMutableBytes {
                            $0.appending { plan.writePacket(at: i, header: &header, of: raw.bytes, into: &$0) }
                        }
                        datagrams.append(Array(buf[0..<n]))
                        expected.append((i == 0, plan.descriptor.pictureID!, layer?.tl0PicIdx, layer?.id, i == 0 ? f == 0 : nil))
                    }
                }
            }
            let (dir, file) = try Tshark.capture(datagrams, port: 5008)
            defer { try? FileManager.default.removeItem(at: dir) }
            let decode = ["udp.port==5008,rtp", "rtp.pt==96,vp8"]
            let rows = try Tshark.fields(
                file, decode: decode,
                [
                    "vp8.pld.s", "vp8.pld.pictureid", "vp8.pld.tl0picidx", "vp8.pld.tid", "vp8.hdr.frametype",
                    "vp8.keyframe.width", "vp8.keyframe.height", "vp8.pld.partid",
                ])
            try #require(rows.count == expected.count)
            for (r, e) in zip(rows, expected) {
                #expect(r[0] == (e.s ? "1" : "0") || r[0] == (e.s ? "True" : "False"))
                #expect(
                    Int(r[1]) == Int(e.pid) || r[1] == String(format: "0x%04x", Int(e.pid)) || r[1] == "\(0x8000 | Int(e.pid))",
                    "pictureid \(r[1]) vs \(e.pid)")
                #expect(r[2] == (e.tl0.map { "\($0)" } ?? ""))
                #expect(r[3] == (e.tid.map { "\($0)" } ?? ""))
                #expect(r[7] == "0")
                if let key = e.key {
                    #expect(r[4] == (key ? "0" : "1") || r[4] == (key ? "False" : "True"), "frame type \(r[4])")
                    if key { #expect(r[5] == "320" && r[6] == "240") }
                }
            }
            let problems = Tshark.problems(try Tshark.verbose(file, decode: decode))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
        }

        @Test func opusPacketsMatchTshark() throws {
            // One Opus packet per RTP packet (RFC 7587 §4.2): every TOC config, code 0 and code 1
            // (two equal frames, so an even frame-data length), 48 kHz timestamps.
            var seq = RTPSequencer(initial: 65_500)
            var header = RTPHeader(payloadType: 111, timestamp: 0, ssrc: 77)
            var datagrams: [[UInt8]] = [], configs: [Int] = [], samples: [Int] = []
            var buf = [UInt8](repeating: 0, count: 1500)
            for config in 0..<32 {
                for code in 0..<2 {
                    let opus: [UInt8] =
                        [UInt8(config << 3 | code)] + (0..<(code == 0 ? 61 : 80)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
                    let n = try opus.withUnsafeBytes { raw in
                        samples.append(try OpusPayload.sampleCount(packet: raw.bytes))
                        let plan = OpusPayload.packetize(frameSize: raw.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
                        header.sequenceNumber = seq.next()
                        return buf.withUnsafeMutableBytes {
                            $0.appending { plan.writePacket(at: 0, header: &header, of: raw.bytes, into: &$0) }
                        }
                    }
                    header.timestamp &+= UInt32(samples.last!)
                    datagrams.append(Array(buf[0..<n]))
                    configs.append(config)
                }
            }
            let (dir, file) = try Tshark.capture(datagrams, port: 5010)
            defer { try? FileManager.default.removeItem(at: dir) }
            let decode = ["udp.port==5010,rtp", "rtp.pt==111,opus"]
            let rows = try Tshark.fields(file, decode: decode, ["rtp.seq", "opus.TOC.config", "opus.TOC.c", "opus.frame_data"])
            try #require(rows.count == datagrams.count)
            for (i, r) in rows.enumerated() {
                #expect(r[1] == "\(configs[i])", "row \(i): \(r)")
                #expect(r[2] == "\(i % 2)", "row \(i): \(r)")
                #expect(r[3].split(separator: ",").count == (i % 2 == 0 ? 1 : 2), "row \(i): \(r)")
            }
            let problems = Tshark.problems(try Tshark.verbose(file, decode: decode))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
        }
    }
#endif
