// Writes the seed corpus of every fuzz target from Revue's own writers, packetizers and encoders
// (scripts/make-fuzz-corpus runs it and adds ffmpeg/GStreamer output next to it).
//
//   fuzz-seeds CORPUS_DIR VP8_IVF VP9_IVF
//
// The IVF inputs are small real encodes (vpxenc/ffmpeg); this program reads them with IVFReader
// and packetizes their frames with VP8Packetizer/VP9Packetizer into packet-sequence seeds.
import Foundation
import FuzzEntries
import MediaCore
import RevueNodeProtocol
import RevueSession

let args = CommandLine.arguments
guard args.count == 4 else {
    FileHandle.standardError.write("usage: fuzz-seeds CORPUS_DIR VP8_IVF VP9_IVF\n".data(using: .utf8)!)
    exit(2)
}
let root = URL(fileURLWithPath: args[1])

func save(_ target: String, _ name: String, _ bytes: [UInt8]) {
    let dir = root.appendingPathComponent(target)
    try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    try! Data(bytes).write(to: dir.appendingPathComponent(name))
}

func readFile(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path)!) }

/// Packet-sequence record format of FuzzEntries (`[len: UInt16 BE][bytes]`).
func records(_ packets: [[UInt8]]) -> [UInt8] {
    packets.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 }
}

func rtpPacket(_ header: RTPHeader, _ payload: [UInt8], padding: Int = 0) -> [UInt8] {
    var out: [UInt8] = []
    out.append(capacity: RTPPacket.marshalSize(header: header, payloadSize: payload.count, paddingSize: padding)) {
        _ = RTPPacket.marshal(header: header, payload: payload.span.bytes, paddingSize: padding, into: &$0)
    }
    return out
}

// MARK: RTP (and datagram)
var plain = RTPHeader(payloadType: 111, sequenceNumber: 1000, timestamp: 48_000, ssrc: 0x1234_5678)
var withExt = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 65535, timestamp: 90_000, ssrc: 42, csrcs: [7, 8])
withExt.extensions.setAudioLevel(RTPAudioLevel(voiceActivity: true, level: 30), id: 1)
withExt.extensions.setAbsSendTime(RTPAbsSendTime(nanoseconds: 1_234_567_890), id: 3)
withExt.extensions.setTransportSequenceNumber(777, id: 5)
var twoByte = RTPHeader(payloadType: 100, sequenceNumber: 5, timestamp: 1, ssrc: 9)
twoByte.extensions.set(id: 20, [UInt8](repeating: 0xAB, count: 20))
twoByte.extensions.set(id: 1, [])
let rtpSeeds: [(String, [UInt8])] = [
    ("plain", rtpPacket(plain, [0x78, 1, 2, 3, 4])),
    ("extensions-csrcs", rtpPacket(withExt, [0x90, 0xE0, 0x12, 0x34, 0x10, 0x00, 0x9D, 0x01, 0x2A])),
    ("two-byte-extension", rtpPacket(twoByte, [1, 2, 3])),
    ("padding", rtpPacket(plain, [0xFC, 0xFF, 0xFE], padding: 4)),
]
for (name, bytes) in rtpSeeds { save("fuzz-rtp", name, bytes); save("fuzz-datagram", "rtp-" + name, bytes) }

// MARK: RTCP
let ntp = NTPTime(unixNanoseconds: 1_700_000_000_000_000_000)
let block = RTCPReportBlock(
    ssrc: 42, fractionLost: 12, cumulativeLost: 345, extendedHighestSequence: 70_000,
    jitter: 80, lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 65_536)
let rtcpSeeds: [(String, [RTCPPacket])] = [
    (
        "sr-sdes",
        [
            .senderReport(
                RTCPSenderReport(ssrc: 1, ntpTime: ntp, rtpTime: 90_000, packetCount: 100, octetCount: 120_000, reports: [block])),
            .sourceDescription(RTCPSourceDescription(ssrc: 1, cname: "revue@host")),
        ]
    ),
    (
        "rr-sdes-bye",
        [
            .receiverReport(RTCPReceiverReport(ssrc: 2, reports: [block, block])),
            .sourceDescription(
                RTCPSourceDescription(chunks: [
                    .init(ssrc: 2, items: [.init(type: .cname, "a"), .init(type: .init(rawValue: 6), "tool")]),
                    .init(ssrc: 3, items: []),
                ])),
            .goodbye(RTCPGoodbye(sources: [2, 3], reason: "done")),
        ]
    ),
    (
        "rr-nack",
        [
            .receiverReport(RTCPReceiverReport(ssrc: 2)),
            .genericNack(RTCPGenericNack(senderSSRC: 2, mediaSSRC: 42, lost: [10, 11, 15, 40, 65535, 0])),
        ]
    ),
    (
        "rr-pli-fir",
        [
            .receiverReport(RTCPReceiverReport(ssrc: 2)),
            .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 2, mediaSSRC: 42)),
            .fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 2, entries: [.init(ssrc: 42, sequenceNumber: 3)])),
        ]
    ),
    (
        "rr-remb",
        [
            .receiverReport(RTCPReceiverReport(ssrc: 2)),
            .receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate(senderSSRC: 2, bitrate: 1_500_000, ssrcs: [42, 43])),
        ]
    ),
]
var rtcpDatagrams: [[UInt8]] = []
for (name, packets) in rtcpSeeds {
    let bytes = RTCPCompound.bytes(packets)
    rtcpDatagrams.append(bytes)
    save("fuzz-rtcp", name, bytes); save("fuzz-datagram", "rtcp-" + name, bytes)
}
save("fuzz-datagram", "stun-binding", [0, 1, 0, 0, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 7, count: 12))

// MARK: VP8 / VP9 packet sequences from real encodes
func frames(_ path: String, limit: Int) -> (IVFHeader, [[UInt8]]) {
    let reader = try! IVFReader(path: path)
    var out: [[UInt8]] = []
    var buffer: [UInt8] = []
    while out.count < limit, (try! reader.readFrame(into: &buffer)) != nil { out.append(buffer) }
    return (reader.header, out)
}

func packetSequence(_ frameList: [[UInt8]], maxPayload: Int, vp9: Bool, size: (Int, Int)) -> [[UInt8]] {
    var vp8 = VP8Packetizer(pictureID: 100)
    var vp9p = VP9Packetizer(pictureID: 32_700)
    var header = RTPHeader(payloadType: 96, sequenceNumber: 65_530, timestamp: 0, ssrc: 0xCAFE)
    var packets: [[UInt8]] = []
    for (i, frame) in frameList.enumerated() {
        header.timestamp = UInt32(i * 3000)
        frame.withUnsafeBytes { f in
            func emit<P: RTPFramePayloads>(_ plan: P) {
                for k in 0..<plan.count {
                    var out = [UInt8](repeating: 0, count: header.marshalSize + plan.payloadSize(at: k))
                    let n = out.withUnsafeMutableBytes {
                        $0.appending { plan.writePacket(at: k, header: &header, of: f.bytes, into: &$0) }
                    }
                    packets.append(Array(out[..<n]))
                    header.sequenceNumber &+= 1
                }
            }
            if vp9 {
                emit(
                    vp9p.packetize(
                        frameSize: f.count, maxPayloadSize: maxPayload, keyframe: i == 0, width: size.0, height: size.1))
            } else {
                emit(vp8.packetize(frameSize: f.count, maxPayloadSize: maxPayload))
            }
        }
    }
    return packets
}

for (target, path, isVP9) in [("fuzz-vp8", args[2], false), ("fuzz-vp9", args[3], true)] {
    let (h, list) = frames(path, limit: 4)
    let seq = packetSequence(list, maxPayload: 400, vp9: isVP9, size: (h.width, h.height))
    // The first byte of a VP8/VP9 input picks the depacketizer capacity (even: 64 KiB).
    save(target, "sequence-mtu400", [0] + records(seq))
    save(target, "sequence-small-capacity", [1] + records(seq))
    save(
        target, "sequence-reordered",
        [0] + records(seq.enumerated().map { $0.offset == 1 ? seq[2] : $0.offset == 2 ? seq[1] : $0.element }))
    save(
        target, "key-frame-single",
        [0] + records(packetSequence(Array(list.prefix(1)), maxPayload: 1200, vp9: isVP9, size: (h.width, h.height))))
    for (i, p) in seq.prefix(3).enumerated() { save("fuzz-rtp", "\(target)-packet\(i)", p) }
}

// MARK: Opus packets from the encoder, and a WAV / Ogg Opus file of them
var opusPackets: [(String, [UInt8], Int)] = []
for (app, rate, channels, duration) in [
    (OpusApplication.voip, OpusSampleRate.hz16000, 1, OpusFrameDuration.ms20),
    (.audio, .hz48000, 2, .ms10), (.audio, .hz48000, 1, .ms60),
    (.restrictedLowDelay, .hz48000, 2, .ms2_5), (.voip, .hz8000, 1, .ms40),
] {
    let encoder = try! OpusEncoder(sampleRate: rate, channels: channels, application: app)
    var audio = SyntheticAudio(pattern: .speech, sampleRate: rate.rawValue, channels: channels)
    let samples = duration.samples(at: rate)
    for k in 0..<3 {
        let pcm = audio.int16s(frames: samples)
        var packet = [UInt8](repeating: 0, count: 1500)
        let n = pcm.withUnsafeBufferPointer { p in packet.withUnsafeMutableBytes { try! encoder.encode(p, into: $0) } }
        if k == 2 {
            opusPackets.append(
                (
                    "\(app)-\(rate.rawValue)-\(channels)ch-\(duration.rawValue)us", Array(packet[..<n]),
                    samples * 48_000 / rate.rawValue
                ))
        }
    }
}
for (name, packet, _) in opusPackets { save("fuzz-opus", name, packet) }
save("fuzz-opus", "code3-cbr-3frames", [0xFB, 0x03, 1, 2, 3, 4, 5, 6])
save("fuzz-opus", "code3-vbr-padded", [0x7B, 0xC2, 0x02, 0x01, 0x02, 0xAA, 0xBB, 0xCC, 0, 0])
save("fuzz-opus", "code2-two-frames", [0x7A, 0x02, 1, 2, 3, 4, 5])

let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("revue-fuzz-seeds-\(getpid())")
try! FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: tmp) }
func written(_ name: String, _ write: (String) throws -> Void) -> [UInt8] {
    let path = tmp.appendingPathComponent(name).path
    try! write(path)
    return readFile(path)
}

save(
    "fuzz-oggopus", "ours-stereo-10ms.opus",
    written("a.opus") { path in
        let w = try OggOpusWriter(path: path, channelCount: 2)
        for _ in 0..<3 { try w.write(opusPackets[1].1, sampleCount: opusPackets[1].2) }
        try w.finish(originalSampleCount: 1000)
    })
save(
    "fuzz-oggopus", "ours-mono-60ms.opus",
    written("b.opus") { path in
        let w = try OggOpusWriter(
            path: path, head: OggOpusHead(channelCount: 1, preSkip: 120),
            tags: OggOpusTags(vendor: "Revue", comments: ["TITLE=seed", "ARTIST=fuzz"]))
        try w.write(opusPackets[2].1, sampleCount: opusPackets[2].2)
        try w.finish()
    })

var tone = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 8000, channels: 2)
let wavSamples = tone.int16s(frames: 64)
save(
    "fuzz-wav", "ours-int16-stereo.wav",
    written("a.wav") { path in
        let w = try WAVWriter(path: path, sampleRate: 8000, channelCount: 2, format: .int16)
        try w.write(wavSamples); try w.finish()
    })
save(
    "fuzz-wav", "ours-float-mono.wav",
    written("b.wav") { path in
        let w = try WAVWriter(path: path, sampleRate: 48_000, channelCount: 1, format: .float32)
        try w.write(wavSamples.map { Float($0) / 32768 }); try w.finish()
    })

let frame = VideoFrame(width: 8, height: 6)
save(
    "fuzz-y4m", "ours-8x6.y4m",
    written("a.y4m") { path in
        let w = try Y4MWriter(path: path, width: 8, height: 6, frameRate: ContainerRational(30, 1))
        for i in 0..<2 { SyntheticVideo.render(frameIndex: i, into: frame); try w.write(frame.view) }
        try w.finish()
    })
let vp8Frames = frames(args[2], limit: 2).1
save(
    "fuzz-ivf", "ours-vp8.ivf",
    written("a.ivf") { path in
        let w = try IVFWriter(path: path, codec: .vp8, width: 64, height: 48, timeBase: ContainerRational(1, 30))
        for (i, f) in vp8Frames.enumerated() { try w.write(f, pts: Int64(i)) }
        try w.finish()
    })

// MARK: SRTP: selector byte (suite << 2 | protect-first << 1 | rtcp) + datagram
for (s, key) in FuzzEntries.srtpKeys.enumerated() {
    let sel = UInt8(s << 2)
    let rtp = rtpSeeds[1].1, rtcp = rtcpDatagrams[0]
    save("fuzz-srtp", "\(key.suite)-roundtrip-rtp", [sel | 2] + rtp)
    save("fuzz-srtp", "\(key.suite)-roundtrip-rtcp", [sel | 3] + rtcp)
    let sender = try! SRTPContext(material: key, direction: .outbound)
    for (isRTCP, plainBytes) in [(false, rtp), (true, rtcp)] {
        var buf = plainBytes + [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { b in
            var span = b.mutableBytes
            return isRTCP
                ? try! sender.protectRTCP(&span, length: plainBytes.count) : try! sender.protect(&span, length: plainBytes.count)
        }
        save("fuzz-srtp", "\(key.suite)-protected-\(isRTCP ? "rtcp" : "rtp")", [sel | (isRTCP ? 1 : 0)] + Array(buf[..<n]))
    }
}

// MARK: SFrame: selector byte (suite | clear prefix << 3 | plaintext mode << 7) + frame
for (s, suite) in SFrameCipherSuite.allCases.enumerated() {
    let vp8 = vp8Frames[0]
    for (i, keyID) in FuzzEntries.sframeKeyIDs.enumerated() {
        let prefix = [10, 3, 1, 0][i]
        let sender = try! SFrameSender(
            suite: suite, keyID: keyID, baseKey: FuzzEntries.sframeBaseKey, initialCounter: UInt64(i) * 300)
        var out = [UInt8](repeating: 0, count: vp8.count + SFrameHeader.maxLength + suite.tagLength)
        let n = out.withUnsafeMutableBytes { o in
            vp8.withUnsafeBytes { try! sender.encryptFrame($0, clearPrefix: prefix, into: o) }
        }
        save("fuzz-sframe", "\(suite)-kid\(keyID)-encrypted", [UInt8(s) | UInt8(prefix << 3)] + Array(out[..<n]))
    }
    save("fuzz-sframe", "\(suite)-plaintext", [UInt8(s) | 0x80 | UInt8(10 << 3)] + vp8)
}

// MARK: SDP as revue-media writes it
var session = SDPSessionDescription(
    origin: SDPOrigin(sessionID: 4_242_424_242, address: "127.0.0.1"),
    sessionName: "Revue", connection: SDPConnection(address: "127.0.0.1"))
session.attributes = [SDPAttribute("tool", "revue-media")]
let keyAndSalt = (0..<30).map { UInt8($0) }
var video = SDPMediaDescription(type: "video", port: 5004, payloadType: 96, encoding: "VP8", clockRate: 90_000)
video.rtcpFeedback = [.nack(96), .pli(96), .fir(96), .remb(96)]
video.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: keyAndSalt)]
video.extensionMaps = [SDPExtensionMap(id: 3, uri: SDPExtensionMap.absoluteSendTimeURI)]
video.ssrcs = [SDPSSRCAttribute(ssrc: 3_000_000_001, attribute: "cname", value: "revue")]
video.direction = .sendonly
var audioMedia = SDPMediaDescription(
    type: "audio", port: 5006, payloadType: 111, encoding: "opus", clockRate: 48_000, channels: 2)
audioMedia.formatParameters = [SDPFormatParameters(payloadType: 111, parameters: "minptime=10;useinbandfec=1")]
audioMedia.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: keyAndSalt)]
audioMedia.extensionMaps = [
    SDPExtensionMap(id: 1, direction: .sendonly, uri: SDPExtensionMap.audioLevelURI, attributes: "vad=on")
]
audioMedia.rtcpMux = true
session.media = [video, audioMedia]
save("fuzz-sdp", "ours-audio-video.sdp", Array(session.text.utf8))

// MARK: JSEP offers and answers as JSEPNegotiator writes them (browser-shaped: BUNDLE, ICE,
// DTLS fingerprint, RTX, header extensions, candidates), a renegotiation with a rejected
// section, and a trickled candidate with end-of-candidates.
let jsepTransport = JSEPTransportParameters(
    ice: JSEPICEParameters(usernameFragment: "Seed", password: "seedpasswordseedpasswd"),
    fingerprints: [JSEPFingerprint(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 * 29 + 7) })],
    candidates: [
        JSEPCandidate("candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host")!,
        JSEPCandidate("candidate:2 1 udp 1694498815 203.0.113.7 40001 typ srflx raddr 127.0.0.1 rport 40000")!,
    ],
    endOfCandidates: true, cname: "seed")
let jsepTracks = [
    JSEPTrack(kind: .audio, id: "mic", streamID: "call", ssrc: 1111),
    JSEPTrack(kind: .video, id: "cam", streamID: "call", ssrc: 2222, retransmissionSSRC: 3333),
]
let jsepOffer = JSEPNegotiator.createOffer(tracks: jsepTracks, transport: jsepTransport, sessionID: 5_000_000_001)
save("fuzz-sdp", "jsep-offer.sdp", Array(jsepOffer.sdp.utf8))
let jsepAnswer = JSEPNegotiator.createAnswer(
    to: jsepOffer, tracks: [jsepTracks[1]], transport: jsepTransport, sessionID: 5_000_000_002)
save("fuzz-sdp", "jsep-answer.sdp", Array(jsepAnswer.sdp.utf8))
var jsepReoffer = JSEPNegotiator.createOffer(
    tracks: [jsepTracks[1], JSEPTrack(kind: .audio, id: "mic2", streamID: "call", ssrc: 4444)],
    transport: jsepTransport, previous: jsepOffer)
jsepReoffer.media.append(JSEPMediaSection(kind: .application, port: 0, proto: "UDP/DTLS/SCTP", formats: ["webrtc-datachannel"]))
jsepReoffer.addCandidate(JSEPCandidate("candidate:3 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active")!, mid: "1")
jsepReoffer.addEndOfCandidates()
save("fuzz-sdp", "jsep-reoffer.sdp", Array(jsepReoffer.sdp.utf8))

// MARK: Revue addresses and friend IDs (RevueAddress.text, as `Revue.revueAddress` shows them)
let seedKey = (0..<32).map { UInt8($0) &* 37 &+ 11 }
let seedAddress = RevueAddress(publicKey: seedKey, nospam: 0xDEAD_BEEF).text
save("fuzz-address", "address", Array(seedAddress.utf8))
save("fuzz-address", "address-lowercase-spaces", Array(("  " + seedAddress.lowercased() + "\n\t").utf8))
save(
    "fuzz-address", "address-nospam-zero",
    Array(RevueAddress(publicKey: [UInt8](repeating: 0xFF, count: 32), nospam: 0).text.utf8))
save("fuzz-address", "address-bad-checksum", Array((seedAddress.dropLast(4) + "0000").utf8))
save("fuzz-address", "friend-id", Array(Hex.encode(seedKey).utf8))

// MARK: Session datagrams from two real peers (FuzzEntries.SessionFixture), as record sequences
for (name, datagrams) in FuzzEntries.sessionSeeds() {
    // Every seed but the rendezvous one must get past authentication, or it only seeds rejections.
    let accepted = FuzzEntries.sessionAccepted(datagrams)
    print("fuzz-session/\(name): \(datagrams.count) datagrams, \(accepted) authenticated")
    precondition(name.hasPrefix("rendezvous") || accepted > 0, "session seed \(name) authenticates nothing")
    save("fuzz-session", name, records(datagrams))
}

// MARK: Rendezvous node actions (FuzzEntries.rendezvous): the cookie round and registration of
// every client, lookups, relay sends, TURN credentials requests, raw and replayed datagrams
func action(_ op: UInt8, _ bytes: [UInt8]) -> [UInt8] { [op] + bytes }
let register = (0..<3).flatMap { c in [action(1, [UInt8(c), 1]), action(1, [UInt8(c), 1])] }
save("fuzz-rendezvous", "register-all", records(register))
save("fuzz-rendezvous", "lookups", records(register + [action(2, [0, 1]), action(2, [1, 2]), action(2, [2, 2])]))
save(
    "fuzz-rendezvous", "relay",
    records(
        register + [
            action(3, [0, 1] + [0x53] + Array(repeating: 7, count: 40)),
            action(3, [1, 0, 0x51] + Array(repeating: 9, count: 140)),
        ]))
var paddedBinding = STUNMessage(method: .binding, class: .request)
paddedBinding.appendText(STUNMessage.AttributeType.software, "revue rendezvous seed")
save(
    "fuzz-rendezvous", "stun-binding",
    records([
        action(0, [0] + paddedBinding.encode(fingerprint: true)),
        action(0, [1] + STUNMessage(method: .binding, class: .request).encode()),
    ]))
save(
    "fuzz-rendezvous", "raw-and-replayed",
    records(
        register + [
            action(0, [0, 0x58, revueProtocolVersion] + Array(repeating: 1, count: 73)),
            action(5, [1, 1]), action(5, [2, 3]), action(0, [3, 0x5C, revueProtocolVersion]),
        ]))

// TURN credentials requests: from each client, one with a spent nonce, one before any
// registration and one replayed from another client's endpoint.
save(
    "fuzz-rendezvous", "turn-credentials",
    records(
        [action(4, [0, 0])] + register + [
            action(4, [0, 0]), action(4, [1, 0]), action(4, [2, 0]), action(4, [1, 0x80]), action(5, [2, 0xFF]),
        ]))

// MARK: STUN messages and TURN client scripts (FuzzEntries.stun)
for (name, bytes) in FuzzEntries.stunSeeds() { save("fuzz-stun", name, bytes) }

// MARK: Call signalling sequences (FuzzEntries.callSignal): invitations, introductions, floods.
for (name, recordsOfSeed) in FuzzEntries.callSignalSeeds() { save("fuzz-call-signal", name, records(recordsOfSeed)) }
// MARK: DTLS datagrams (FuzzEntries.dtls)
for (name, bytes) in FuzzEntries.dtlsSeeds() { save("fuzz-dtls", name, bytes) }
// MARK: HTTP/1.1 messages (FuzzEntries.http)
for (name, bytes) in FuzzEntries.httpSeeds() { save("fuzz-http", name, bytes) }

// MARK: WebSocket frames (FuzzEntries.webSocket)
for (name, bytes) in FuzzEntries.webSocketSeeds() { save("fuzz-websocket", name, bytes) }
// MARK: Data channel establishment messages (FuzzEntries.dcep)
for (name, bytes) in FuzzEntries.dcepSeeds() { save("fuzz-dcep", name, bytes) }

// MARK: revue-node command lines: every command as NodeCommandLine.encode writes it, lines as the
// revue-node process tests send them, and event lines as revue-node writes them
let friendId = Hex.encode(seedKey)
let commands: [NodeCommand] = [
    .address, .addFriend(address: seedAddress, message: "hi"), .accept(friendId: friendId), .delete(friendId: friendId),
    .setName("Alice"), .setStatusMessage("busy day"), .setStatus(.away), .setNospam(0xDEAD_BEEF),
    .message(friendId: friendId, message: "hello", timeout: 30), .list, .counters,
    .invite(friendId: friendId, message: "call?"), .acceptCall(friendId: friendId), .rejectCall(friendId: friendId),
    .cancelCall(friendId: friendId), .hangup(friendId: nil), .hangup(friendId: friendId),
    .callMessage(message: "hello from c", to: [friendId], timeout: 10), .muteRequest(friendId: friendId, isMuted: true),
    .mic(enabled: false), .camera(enabled: true), .mute(sid: "audio"), .unmute(sid: "video"),
    .subscribe(friendId: friendId, sid: "video", subscribed: false), .mode(.recvOnly), .feed(seconds: 2, tone: 440),
    .mediaStats, .room, .quit,
]
let encoded = commands.enumerated().map { i, c in
    NodeCommandLine.encode(
        NodeRequest(
            name: NodeCommandLine.name(of: c),
            id: i % 3 == 0 ? nil : NodeCommandID(i % 3 == 1 ? .int(Int64(i)) : .string("r\(i)")),
            command: c))
}
save("fuzz-node-command", "every-command", Array(encoded.joined(separator: "\n").utf8))
save(
    "fuzz-node-command", "process-test-lines",
    Array(
        """
        {"cmd":"message","friendId":"\(friendId)","message":"k1","id":1,"timeout":30}
        {"cmd":"feed","seconds":2,"tone":440,"id":"f"}
        {"cmd":"call-message","message":"hello from c","id":"m"}
        {"cmd":"add-friend","friendId":"\(friendId)"}
        {"cmd":"set-status","status":"dnd"}
        {"cmd":"mode","mode":"sendAndRecv","id":[1,{"a":null}]}
        {"cmd":"set-nospam","nospam":4294967296}
           
        not json
        {"cmd":"nope"}
        """.utf8))

// revue-node's output lines (the same target reads every line as a NodeEvent too): one event of
// each kind as NodeEvent.line writes it.
let peer = NodeParticipant(friendId: friendId, isLocal: false)
let me = NodeParticipant(friendId: friendId, isLocal: true)
let events: [NodeEvent] = [
    .ready(.peer(address: seedAddress, revueId: friendId, port: 40123, lan: true)),
    .ready(.rendezvous(port: 33400, turn: NodeTURNOffer(servers: ["203.0.113.1:3478?transport=tcp"], lifetime: 3600))),
    .ok(
        NodeReply(
            cmd: "address", id: NodeCommandID(1), result: .identity(address: seedAddress, revueId: friendId, port: 1, nospam: 2))),
    .ok(NodeReply(cmd: "message", id: NodeCommandID("m"), result: .messageSent(friendId: friendId, messageId: 7))),
    .ok(
        NodeReply(
            cmd: "list",
            result: .friends([
                NodeFriend(
                    friendId: friendId, name: "Bob", statusMessage: "", status: .away, isOnline: true,
                    paths: [NodePath(kind: .directLAN, endpoint: "127.0.0.1:41000", rtt: 0.0004)], presence: .online)
            ]))),
    .ok(NodeReply(cmd: "call-message", result: .callMessage(results: [friendId: "delivered"]))),
    .ok(
        NodeReply(
            cmd: "feed", id: NodeCommandID("f"), result: .feed(videoFramesFed: 30, audioSamplesFed: 96_000, maxLagMilliseconds: 2)
        )),
    .ok(
        NodeReply(
            cmd: "media-stats",
            result: .mediaStats(
                NodeMediaStats(
                    participants: [
                        NodeMediaParticipant(
                            friendId: friendId, videoFrames: 29, audioSamples: 960, loudSamples: 960,
                            path: NodeMediaPath(["local": "host 127.0.0.1:1", "relayed": false, "checksSent": 3]))
                    ], uplinkBytes: 1000,
                    videoSend: NodeVideoSend(
                        captured: 1, droppedRingFull: 0, droppedPoolExhausted: 0, droppedFrameRate: 0, framesEncoded: 1,
                        framesDroppedByEncoder: 0, targetBitrate: 300_000, pacerOverflows: 0))))),
    .ok(
        NodeReply(
            cmd: "room",
            result: .room(
                NodeRoomState(
                    participants: [
                        NodeRoomParticipant(
                            friendId: friendId, name: nil, mode: .recvOnly,
                            tracks: [NodeTrack(sid: "audio", kind: .audio, isMuted: false, isSubscribed: true)],
                            connectionQuality: .good, isSpeaking: true)
                    ], mode: .sendAndRecv, tracks: [NodeTrack(sid: "video", kind: .video, isMuted: true)],
                    activeSpeakers: [friendId])))),
    .error(NodeErrorReply(cmd: "message", id: NodeCommandID(3), error: "timeout", friendId: friendId, messageId: 4)),
    .error(NodeErrorReply(cmd: "delete", error: "failed", code: -1, detail: "storage")),
    .didUpdatePaths(friendId: friendId, isOnline: false, paths: []),
    .didReceiveInvitation(friendId: friendId, message: nil),
    .didEndInvitation(friendId: friendId, reason: .timeout),
    .room(.participantDidDisconnect(peer, reason: .remoteHangUp)),
    .room(.callDidFailWithError(.mediaSetupFailed(participant: friendId, detail: "no pair"))),
    .room(.didFailToPublishTrack(me, kind: .video, error: .mediaSetupFailed(detail: "no encoder"))),
    .room(.didUpdateConnectionQuality(peer, quality: .excellent)),
    .room(.didUpdateSpeakingParticipants(speakers: [friendId])),
]
save("fuzz-node-command", "every-event", Array(events.compactMap(\.line).joined(separator: "\n").utf8))
