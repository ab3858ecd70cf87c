/// What kind of packet a datagram arriving on a shared socket is, from its first bytes
/// (RFC 7983 §7 first-byte ranges; RTP vs RTCP by payload type per RFC 5761 §4).
public enum DatagramKind: Sendable, Equatable {
    /// First byte 0...3: STUN (RFC 5389).
    case stun
    /// First byte 16...19: ZRTP (RFC 6189).
    case zrtp
    /// First byte 20...63: DTLS (RFC 6347).
    case dtls
    /// First byte 64...79: TURN channel data (RFC 5766).
    case turnChannel
    /// First byte 128...191 and second byte's low 7 bits outside 64...95: RTP.
    case rtp
    /// First byte 128...191 and packet type 192...223 (RFC 5761 §4): RTCP.
    case rtcp
    /// Anything else: empty datagrams and first bytes 4...15, 80...127, 192...255. The session
    /// layer's own packets use a first byte in these ranges.
    case other
}

/// Classifies datagrams on a socket shared by STUN, DTLS, RTP, RTCP and the session layer.
/// Thread rule: stateless, any thread. Cost: reads two bytes.
public enum RTPDemultiplexer {
    /// Classifies one datagram (RFC 7983 §7, RFC 5761 §4). A 128...191 datagram shorter than
    /// 2 bytes is `.other`: it cannot be RTP or RTCP.
    public static func classify(_ d: RawSpan) -> DatagramKind {
        guard d.byteCount > 0 else { return .other }
        let b0 = d.u8(0)
        switch b0 {
        case 0...3: return .stun
        case 16...19: return .zrtp
        case 20...63: return .dtls
        case 64...79: return .turnChannel
        case 128...191:
            guard d.byteCount >= 2 else { return .other }
            // RFC 5761 §4: RTCP packet types 192-223 map onto RTP PT 64-95 with the marker bit
            // set or clear; RTP streams must avoid PTs 64-95 when multiplexed.
            let pt = d.u8(1) & 0x7F
            return (64...95).contains(pt) ? .rtcp : .rtp
        default: return .other
        }
    }

    /// Classifies a byte array (convenience).
    public static func classify(_ bytes: [UInt8]) -> DatagramKind { classify(bytes.span.bytes) }
}
