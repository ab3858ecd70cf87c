import MediaCore

extension FuzzEntries {
    /// The Data Channel Establishment Protocol's messages (RFC 8832), as a peer's SCTP stream
    /// delivers them with PPID 50: `PeerConnectionDataChannels.parseOpen` on any bytes.
    ///
    /// Properties: parsing never traps; a message it takes names lengths that fit in it, a
    /// known channel type and at most one reliability limit; written again with `openMessage`
    /// it parses to the same request; and every shorter prefix of that message is refused.
    /// Thread rule: any thread. Cost: a few parses of the input.
    @Sendable public static func dcep(_ data: UnsafeRawBufferPointer) {
        guard let request = PeerConnectionDataChannels.parseOpen(data) else { return }
        let labelLength = Int(data[8]) << 8 | Int(data[9]), protocolLength = Int(data[10]) << 8 | Int(data[11])
        fuzzRequire(12 + labelLength + protocolLength <= data.count, "lengths past the end were taken")
        fuzzRequire(request.maxRetransmits == nil || request.maxPacketLifeTime == nil, "two reliability limits")
        fuzzRequire(request.ordered == (data[1] & 0x80 == 0), "ordering misread")
        let again = PeerConnectionDataChannels.openMessage(request)
        let back = again.withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) }
        fuzzRequire(back == request, "written again, the request reads differently")
        for n in [0, 1, 11, again.count - 1] where n >= 0 && n < again.count {
            fuzzRequire(
                again[0..<n].withUnsafeBytes { PeerConnectionDataChannels.parseOpen($0) } == nil, "a prefix of \(n) bytes parsed")
        }
    }

    /// Seeds: an open of each channel type (reliable, the two partial kinds, unordered), with and
    /// without label and protocol, a non-ASCII label, an ACK, and hostile lengths.
    public static func dcepSeeds() -> [(String, [UInt8])] {
        typealias R = PeerConnectionDataChannels.OpenRequest
        let opens: [(String, R)] = [
            ("open-reliable-chat", R(ordered: true, label: "chat", protocol: "")),
            ("open-unordered-retransmits", R(ordered: false, maxRetransmits: 3, label: "game", protocol: "state")),
            ("open-lifetime", R(ordered: true, maxPacketLifeTime: 150, label: "telemetry", protocol: "json")),
            ("open-empty-label", R(ordered: true, label: "", protocol: "")),
            ("open-utf8-label", R(ordered: true, label: "caméra ↔ 音声", protocol: "x-revue")),
        ]
        var seeds = opens.map { ($0.0, PeerConnectionDataChannels.openMessage($0.1)) }
        seeds.append(("ack", [0x02]))
        seeds.append(("open-label-length-past-end", [0x03, 0x00, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0x61]))
        seeds.append(("open-unknown-channel-type", [0x03, 0x05, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]))
        return seeds
    }
}
