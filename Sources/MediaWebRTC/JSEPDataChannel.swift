// The data channel section of JSEP descriptions (RFC 8841): `m=application ... UDP/DTLS/SCTP
// webrtc-datachannel` with `a=sctp-port` and `a=max-message-size`.

/// What our descriptions say about data channels. Thread rule: a value type. Cost: none.
package struct JSEPDataChannelParameters: Hashable, Sendable {
    /// The `m=` protocol written in offers (answers repeat the offer's).
    package static let proto = "UDP/DTLS/SCTP"
    /// The one `m=` format of a data channel section.
    package static let format = "webrtc-datachannel"
    /// The SCTP port a peer that writes no `a=sctp-port` uses (RFC 8841 §5.2 has no default; every
    /// WebRTC stack uses 5000).
    package static let defaultSCTPPort = 5000
    /// The largest message a peer that writes no `a=max-message-size` takes (RFC 8841 §6.1).
    package static let defaultMaxMessageSize = 65_536

    /// Our SCTP port (`a=sctp-port`).
    package var sctpPort = defaultSCTPPort
    /// The largest message we take (`a=max-message-size`), in bytes.
    package var maxMessageSize: Int

    /// Parameters with our SCTP port and the largest message we take.
    package init(sctpPort: Int = defaultSCTPPort, maxMessageSize: Int) {
        self.sctpPort = sctpPort
        self.maxMessageSize = maxMessageSize
    }
}

extension JSEPMediaSection {
    /// Whether this is a data channel section: `m=application` over SCTP on DTLS with the
    /// `webrtc-datachannel` format. Thread rule: a value type. Cost: a scan of the formats.
    package var isDataChannel: Bool {
        kind == .application && proto.uppercased().hasSuffix("DTLS/SCTP")
            && formats.contains(JSEPDataChannelParameters.format)
    }

    /// `a=sctp-port` (1-65535), nil when absent or out of range. Cost: a scan of the attributes.
    package var sctpPort: Int? {
        guard let v = otherAttributes.first(where: { $0.name == "sctp-port" })?.value,
            let port = Int(v.trimmingWhitespace), (1...65_535).contains(port)
        else { return nil }
        return port
    }

    /// `a=max-message-size` in bytes (0: no limit, RFC 8841 §6), nil when absent or unreadable.
    /// Cost: a scan of the attributes.
    package var maxMessageSize: Int? {
        guard let v = otherAttributes.first(where: { $0.name == "max-message-size" })?.value,
            let size = Int(v.trimmingWhitespace), size >= 0
        else { return nil }
        return size
    }
}
