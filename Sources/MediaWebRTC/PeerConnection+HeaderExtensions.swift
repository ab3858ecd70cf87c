// RTP header extensions on a WebRTC connection (RFC 8285): which IDs our packets carry and which
// ones we read, from the descriptions of the last complete exchange.
//
// The send streams are made before any description, so each reserves its elements under fixed
// IDs of its own (`PeerConnectionHeaderExtensions.reserved`); the egress writes the peer's IDs
// into them just before protection, or blanks an element the answer did not keep
// (`LateSendProtection.setExtensionIDs`). What we receive is read under the IDs of our own
// description.
import MediaPipeline
import MediaWire

/// The header extension IDs a `PeerConnection` uses, worked out from an exchange's descriptions.
/// Thread rule: stateless; any thread. Cost: a walk over the sections' `a=extmap` lines.
package enum PeerConnectionHeaderExtensions {
    /// The IDs a local track's send stream reserves its elements under before anything is
    /// negotiated (never seen by the peer: the egress rewrites or blanks them). Deliberately not
    /// the IDs browsers and our own offers give these extensions, so a packet that left without
    /// its IDs rewritten would not be read as if it were right.
    package static let reserved = NegotiatedHeaderExtensionIDs(
        audioLevel: 14, absSendTime: 13, transportSequence: 12, mid: 11)

    /// The IDs our packets in section `mid` carry: for each extension the answer kept in that
    /// section, the ID the peer's description gives it (`remote`; the answer itself when the peer
    /// answered). 0 for an extension the answer left out, a rejected or missing section, or an
    /// ID that does not fit the one-byte form (above 14).
    package static func sendIDs(
        mid: String?, remote: JSEPSessionDescription, answer: JSEPSessionDescription
    ) -> NegotiatedHeaderExtensionIDs {
        guard let mid, let kept = answer.media.first(where: { $0.mid == mid }), !kept.isRejected,
            let described = remote.media.first(where: { $0.mid == mid })
        else { return NegotiatedHeaderExtensionIDs() }
        func id(_ uri: String) -> UInt8 {
            guard kept.extensionID(uri) != nil, let id = described.extensionID(uri), (1...14).contains(id) else { return 0 }
            return UInt8(id)
        }
        return NegotiatedHeaderExtensionIDs(
            audioLevel: kept.kind == .audio ? id(SDPExtensionMap.audioLevelURI) : 0,
            absSendTime: id(SDPExtensionMap.absoluteSendTimeURI),
            transportSequence: id(SDPExtensionMap.transportSequenceNumberURI), mid: id(SDPExtensionMap.midURI))
    }

    /// The ID under which we read `uri` in the peer's packets: the one our own description
    /// (`local`) gives it in the first accepted RTP section of `kind` (any kind when nil) whose
    /// answer kept it. Nil when no such section keeps it. Two-byte IDs (15-255) are returned too:
    /// the receive side reads both forms.
    package static func receiveID(
        _ uri: String, kind: JSEPMediaKind? = nil, local: JSEPSessionDescription, answer: JSEPSessionDescription
    ) -> UInt8? {
        for m in answer.media where !m.isRejected && m.isRTP && (kind == nil || m.kind == kind) {
            guard m.extensionID(uri) != nil, let mine = local.media.first(where: { $0.mid == m.mid }),
                let id = mine.extensionID(uri), (1...255).contains(id)
            else { continue }
            return UInt8(id)
        }
        return nil
    }
}
