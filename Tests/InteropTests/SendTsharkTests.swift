#if canImport(Glibc)
    import Testing
    import Foundation
    import MediaCore

    /// The pcap sink's files read by tshark (an independent RTP, VP8 and Opus dissector): a video and
    /// an audio stream sharing one `PcapPacketSink`, plain RTP and SRTP.
    @Suite(.enabled(if: Tshark.available, "tshark not installed"))
    struct SendTsharkTests {
        static let port: UInt16 = 5_030

        /// Runs a VP8 and an Opus stream for 1 s of media into one pcap file; returns the file, the configs.
        static func record(srtp: SRTPSuite?, in dir: InteropTempDir)
            throws -> (file: String, video: VideoSendStream.Configuration, audio: AudioSendStream.Configuration)
        {
            let file = dir.file("send.pcap")
            let sink = try PcapPacketSink(path: file, destination: PcapEndpoint(192, 0, 2, 2, port: port))
            var vc = VideoSendStream.Configuration(codec: .vp8, width: 320, height: 240)
            vc.srtp = srtp.map { .random(for: $0) }
            vc.initialSequenceNumber = 65_520
            var ac = AudioSendStream.Configuration()
            ac.srtp = srtp.map { .random(for: $0) }
            let video = try VideoSendStream(configuration: vc, sink: sink)
            let audio = try AudioSendStream(configuration: ac, sink: sink)
            video.start(); audio.start()
            var gen = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.4)
            let pcm = gen.floats(frames: 48_000)
            let frame = VideoFrame(width: 320, height: 240)
            for i in 0..<30 {
                SyntheticVideo.render(frameIndex: i, into: frame)
                video.capturer.capture(PixelBufferView(frame.view), timeStampNs: Int64(i) * 33_333_333)
                pcm.withUnsafeBufferPointer { all in
                    let b = i * 1600
                    audio.capturer.capture(
                        UnsafeBufferPointer(rebasing: all[b..<(b + 1600)]), sampleRate: 48_000, channels: 1,
                        timeStampNs: Int64(i) * 33_333_333)
                }
                usleep(5_000)  // a real capture queue lets the encoder keep up (a full ring would drop frames)
            }
            video.stop(); audio.stop()
            try sink.finish()
            #expect(sink.failureCount == 0)
            #expect(UInt64(sink.packetCount) == video.statistics.outbound.packetsSent + audio.statistics.outbound.packetsSent)
            return (file, vc, ac)
        }

        @Test func plainRTPParsesAsVP8AndOpusWithoutWarnings() throws {
            let dir = InteropTempDir(); defer { dir.remove() }
            let (file, vc, ac) = try Self.record(srtp: nil, in: dir)
            let decode = ["udp.port==\(Self.port),rtp", "rtp.pt==96,vp8", "rtp.pt==111,opus"]
            let problems = Tshark.problems(try Tshark.verbose(file, decode: decode))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
            let rows = try Tshark.fields(
                file, decode: decode,
                [
                    "rtp.ssrc", "rtp.p_type", "rtp.seq", "rtp.marker", "rtp.ext.rfc5285.id",
                    "vp8.pld.pictureid", "vp8.hdr.frametype", "vp8.keyframe.width", "vp8.keyframe.height",
                    "opus.TOC.config",
                ])
            let videoRows = rows.filter { $0[1] == "96" }, audioRows = rows.filter { $0[1] == "111" }
            #expect(videoRows.count > 30 && audioRows.count >= 49)
            #expect(videoRows.allSatisfy { UInt32($0[0].dropFirst(2), radix: 16) == vc.ssrc })
            #expect(audioRows.allSatisfy { UInt32($0[0].dropFirst(2), radix: 16) == ac.ssrc })
            // Sequence numbers contiguous over the 16-bit wrap; one-byte extension IDs as configured.
            for (k, r) in videoRows.enumerated() {
                #expect(Int(r[2]) == (65_520 + k) & 0xFFFF)
                #expect(r[4] == "3")
            }
            for r in audioRows { #expect(r[4] == "1,3") }
            // One PictureID per frame (marker on its last packet): 30 frames, consecutive IDs.
            let frameEnds = videoRows.filter { $0[3] == "1" || $0[3] == "True" }
            #expect(frameEnds.count == 30)
            let ids = frameEnds.compactMap { Int($0[5]) }
            #expect(ids.count == 30)
            for k in 1..<ids.count { #expect(ids[k] == (ids[k - 1] + 1) & 0x7FFF) }
            // The keyframe's size as VP8 (RFC 6386 §9.1) says it.
            let key = videoRows.first { !$0[7].isEmpty }
            #expect(key?[7] == "320" && key?[8] == "240")
            // Opus TOC: 20 ms frames (SILK, hybrid or CELT configs 1/3, 13/15, 19/23/27/31 all mean 20 ms).
            #expect(audioRows.allSatisfy { ["1", "5", "9", "13", "15", "19", "23", "27", "31"].contains($0[9]) })
        }

        @Test func srtpPacketsParseAsRTPWithoutWarnings() throws {
            let dir = InteropTempDir(); defer { dir.remove() }
            let (file, vc, ac) = try Self.record(srtp: .aeadAES128GCM, in: dir)
            let decode = ["udp.port==\(Self.port),rtp"]
            let problems = Tshark.problems(try Tshark.verbose(file, decode: decode))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
            let rows = try Tshark.fields(file, decode: decode, ["rtp.ssrc", "rtp.p_type", "rtp.ext.rfc5285.id", "udp.length"])
            let ssrcs = Set(rows.compactMap { UInt32($0[0].dropFirst(2), radix: 16) })
            #expect(ssrcs == [vc.ssrc, ac.ssrc])
            #expect(rows.allSatisfy { (Int($0[3]) ?? 9_999) - 8 <= 1200 })
        }
    }
#endif
