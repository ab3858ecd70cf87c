// The data channel section of offers and answers (RFC 8841) and the DATA_CHANNEL_OPEN message
// (RFC 8832): a browser's section is parsed and answered with our SCTP port and message limit,
// our offers carry one (kept in place on renegotiation), and DCEP opens are written and read
// back, with every short or overlong one refused; the send queue's bounds, without a network.
import Dispatch
import MediaCore
import Synchronization
import Testing

@Suite struct JSEPDataChannelTests {
    static let parameters = JSEPDataChannelParameters(maxMessageSize: 262_144)

    @Test func browserDataSectionIsParsedAndAnswered() throws {
        let offer = try JSEPSessionDescription(parsing: JSEPTests.browserOffer, type: .offer)
        let offered = try #require(offer.media.first { $0.kind == .application })
        #expect(offered.isDataChannel)
        #expect(offered.sctpPort == 5000 && offered.maxMessageSize == 1_073_741_823)
        let answer = JSEPNegotiator.createAnswer(
            to: offer, tracks: [], transport: JSEPTests.transport, previous: nil, dataChannel: Self.parameters)
        let section = try #require(answer.media.first { $0.mid == "2" })
        #expect(!section.isRejected && section.isDataChannel && section.proto == "UDP/DTLS/SCTP")
        #expect(section.sctpPort == 5000 && section.maxMessageSize == 262_144)
        #expect(section.setup == .active)
        #expect(answer.bundle.contains("2"))
        // Written and read back: the m-line and both attributes, no direction attribute.
        let text = answer.sdp
        #expect(text.contains("m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"))
        #expect(text.contains("a=sctp-port:5000\r\n") && text.contains("a=max-message-size:262144\r\n"))
        let reread = try JSEPSessionDescription(parsing: text, type: .answer)
        #expect(reread.media.first { $0.mid == "2" }?.isDataChannel == true)
        // Without data channel parameters (the public negotiator) the section is rejected, as before.
        let plain = JSEPNegotiator.createAnswer(to: offer, tracks: [], transport: JSEPTests.transport)
        #expect(plain.media.first { $0.mid == "2" }?.isRejected == true)
    }

    @Test func offersCarryTheDataSectionAndKeepItsPlace() throws {
        let offer = JSEPNegotiator.createOffer(
            tracks: [JSEPTests.audio], transport: JSEPTests.transport, previous: nil, dataChannel: Self.parameters)
        #expect(offer.media.map(\.mid) == ["0", "1"])
        #expect(offer.media[1].isDataChannel && offer.media[1].setup == .actpass && offer.bundle == ["0", "1"])
        // A renegotiation with a video track added: the data section stays second, video goes last.
        let again = JSEPNegotiator.createOffer(
            tracks: [JSEPTests.audio, JSEPTests.video], transport: JSEPTests.transport, previous: offer,
            dataChannel: Self.parameters)
        #expect(again.media.map(\.kind) == [.audio, .application, .video])
        #expect(again.media.map(\.mid) == ["0", "1", "2"])
        // A data-only offer, and one whose previous section is dropped without parameters.
        let dataOnly = JSEPNegotiator.createOffer(
            tracks: [], transport: JSEPTests.transport, previous: nil, dataChannel: Self.parameters)
        #expect(dataOnly.media.count == 1 && dataOnly.media[0].isDataChannel)
        let dropped = JSEPNegotiator.createOffer(tracks: [JSEPTests.audio], transport: JSEPTests.transport, previous: offer)
        #expect(dropped.media[1].isRejected)
    }

    @Test func attributesOutOfRangeAreIgnored() {
        var s = JSEPMediaSection(kind: .application, proto: "UDP/DTLS/SCTP", formats: ["webrtc-datachannel"])
        for bad in ["0", "70000", "-1", "x", ""] {
            s.otherAttributes = [SDPAttribute("sctp-port", bad), SDPAttribute("max-message-size", bad)]
            #expect(s.sctpPort == nil)
        }
        s.otherAttributes = [SDPAttribute("max-message-size", "0")]
        #expect(s.maxMessageSize == 0)
        s.formats = ["5000"]
        #expect(!s.isDataChannel)
        #expect(!JSEPMediaSection(kind: .application, proto: "UDP/TLS/RTP/SAVPF", formats: ["webrtc-datachannel"]).isDataChannel)
    }

    @Test func openMessagesRoundTripAndMalformedOnesAreRefused() throws {
        let owner = PeerConnectionDataChannels(queue: DispatchQueue(label: "test"), queueKey: DispatchSpecificKey())
        let cases: [(DataChannelOptions, String, String)] = [
            (DataChannelOptions(), "chat", ""),
            (
                {
                    var o = DataChannelOptions(); o.ordered = false; o.maxRetransmits = 0; return o
                }(), "lossy", "proto"
            ),
            (
                {
                    var o = DataChannelOptions(); o.maxPacketLifeTime = 150; return o
                }(), "ünïcode ✓", ""
            ),
        ]
        for (options, label, proto) in cases {
            var o = options
            o.protocol = proto
            let channel = DataChannel(label: label, options: o, id: 1, locallyMade: true, owner: owner)
            let bytes = PeerConnectionDataChannels.openMessage(channel)
            let parsed = try #require(bytes.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) })
            #expect(parsed.label == label && parsed.protocol == proto && parsed.ordered == o.ordered)
            #expect(parsed.maxRetransmits == o.maxRetransmits && parsed.maxPacketLifeTime == o.maxPacketLifeTime)
            // Every shorter prefix is refused (the lengths run past the end, or the header is short).
            for n in 0..<bytes.count {
                #expect(bytes[0..<n].withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) } == nil)
            }
        }
        // Unknown channel types and message types.
        var unknown: [UInt8] = [0x03, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        #expect(unknown.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) } == nil)
        unknown[1] = 0
        unknown[0] = 0x04
        #expect(unknown.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) } == nil)
        // Lengths of 65,535 in a short message.
        let huge: [UInt8] = [0x03, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]
        #expect(huge.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) } == nil)
        // Random bytes never trap.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var b = (0..<Int.random(in: 0..<64, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
            if !b.isEmpty { b[0] = 0x03 }
            _ = b.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) }
        }
    }

    @Test func optionsThatCannotWorkAreRefused() {
        let owner = PeerConnectionDataChannels(queue: DispatchQueue(label: "test"), queueKey: DispatchSpecificKey())
        var both = DataChannelOptions()
        both.maxRetransmits = 1
        both.maxPacketLifeTime = 1
        #expect(throws: DataChannelError.invalidOptions("maxRetransmits and maxPacketLifeTime together")) {
            try owner.create(label: "x", options: both)
        }
        var negotiated = DataChannelOptions()
        negotiated.negotiated = true
        #expect(throws: DataChannelError.invalidOptions("a negotiated channel needs an id")) {
            try owner.create(label: "x", options: negotiated)
        }
        negotiated.id = 1024
        #expect(throws: DataChannelError.invalidOptions("id 1024 is not below 1024")) {
            try owner.create(label: "x", options: negotiated)
        }
        var negative = DataChannelOptions()
        negative.maxRetransmits = -1
        #expect(throws: DataChannelError.self) { try owner.create(label: "x", options: negative) }
    }

    /// What waits to be sent is bounded per connection (16 MiB) and released when the connection
    /// ends; messages given before the peer's limit is known are held to 65,536 bytes.
    @Test func sendQueueIsBoundedAndReleasedOnShutdown() throws {
        let queue = DispatchQueue(label: "test")
        let key = DispatchSpecificKey<UInt8>()
        queue.setSpecific(key: key, value: 1)
        let owner = PeerConnectionDataChannels(queue: queue, queueKey: key)
        let channel = try owner.create(label: "bulk", options: DataChannelOptions())
        let closed = Mutex(0)
        channel.onClose = { closed.withLock { $0 += 1 } }
        #expect(throws: DataChannelError.messageTooLarge(size: 65_537, limit: 65_536)) {
            try channel.send([UInt8](repeating: 0, count: 65_537))
        }
        let chunk = [UInt8](repeating: 1, count: 65_536)
        for _ in 0..<256 { try channel.send(chunk) }
        #expect(channel.bufferedAmount == 16 << 20)
        #expect(throws: DataChannelError.bufferFull) { try channel.send([1]) }
        queue.sync { owner.shutdown() }
        #expect(channel.bufferedAmount == 0 && channel.readyState == .closed)
        #expect(closed.withLock { $0 } == 1)
        #expect(throws: DataChannelError.invalidState("the channel is closed")) { try channel.send("x") }
        #expect(throws: DataChannelError.invalidState("the connection or its SCTP association has ended")) {
            try owner.create(label: "late", options: DataChannelOptions())
        }
    }
}
