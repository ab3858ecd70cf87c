#if canImport(Glibc)
    import Testing
    import Foundation
    @testable import MediaCore

    @Suite(.enabled(if: GStreamerPayloadCheck.available, "ffmpeg or gst-launch-1.0 missing"))
    struct VP9PayloadGStreamerTests {
        @Test func gstreamerDepayloadsAndDecodesOurFlexibleModeVP9Packets() throws {
            let r = try GStreamerPayloadCheck.roundTrip(
                codec: "VP9", encoder: "libvpx-vp9", depay: "rtpvp9depay", decoder: "vp9dec"
            ) { frames in
                var packetizer = VP9Packetizer()
                var header = RTPHeader(payloadType: 96, ssrc: 0x5EED)
                var seq = RTPSequencer(initial: 65_500)
                var clock = RTPClock(rate: RTPClock.videoRate)
                var out: [[UInt8]] = []
                var buf = [UInt8](repeating: 0, count: 1500)
                for (i, f) in frames.enumerated() {
                    header.timestamp = clock.timestamp(captureNs: Int64(i) * 1_000_000_000 / 30)
                    // VP9 uncompressed header (VP9 bitstream spec §6.2): frame_type is the bit after
                    // frame_marker(2), profile(2) and show_existing_frame(1); 0 means key frame.
                    let key = f[0] & 0x04 == 0
                    f.withUnsafeBytes { raw in
                        let plan = packetizer.packetize(
                            frameSize: raw.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200), keyframe: key,
                            width: 640, height: 480)
                        for k in 0..<plan.count {
                            header.sequenceNumber = seq.next()
                            let n = buf.withUnsafeMutableBytes {
                                $0.appending { plan.writePacket(at: k, header: &header, of: raw.bytes, into: &$0) }
                            }
                            out.append(Array(buf[0..<n]))
                        }
                    }
                }
                return out
            }
            let frameSize = 640 * 480 * 3 / 2
            #expect(r.packets > r.frames)
            #expect(r.reference.count == r.frames * frameSize)
            #expect(r.gst.count == r.reference.count, "GStreamer decoded \(r.gst.count / frameSize) of \(r.frames) frames")
            // Compare outside #expect: a failing array comparison would make Swift Testing diff 14 MB.
            let firstBadFrame = GStreamerPayloadCheck.firstDifferingFrame(r.gst, r.reference, frameSize: frameSize)
            #expect(firstBadFrame == nil, "decoded frame \(firstBadFrame ?? -1) differs")
        }

        @Test func ourDepacketizerRestoresGStreamerNonFlexibleVP9Frames() throws {
            let (frames, packets) = try GStreamerPayloadCheck.gstreamerPackets(
                encoder: "libvpx-vp9", payloader: ["rtpvp9pay", "mtu=1200", "picture-id-mode=15-bit"])
            try #require(frames.count > 0)
            #expect(packets.count > frames.count)
            // GStreamer's payloader uses non-flexible mode (F=0).
            let flexible = try packets[0].withUnsafeBytes {
                try VP9PayloadDescriptor.parse($0.bytes.extracting(try RTPPacket(parsing: $0.bytes).payloadRange)).0.flexibleMode
            }
            #expect(!flexible)
            let d = VP9Depacketizer()
            let got = try GStreamerPayloadCheck.depacketize(packets) { try d.push($0, in: $1) }
            #expect(got.incomplete == 0)
            #expect(got.frames.count == frames.count)
            #expect(got.frames == frames)
            // VP9 bitstream §6.2: frame_type bit after frame_marker, profile and show_existing_frame.
            #expect(got.keys == frames.map { $0[0] & 0x04 == 0 })
            #expect(d.scalabilityStructure?.width(layer: 0) == 640)
        }
    }
#endif
