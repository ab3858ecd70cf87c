/// Why an RTP, RTCP or payload-format parser rejected its input, shaped like swift-system's `Errno`:
/// a stable numeric code plus a message naming the input and what is wrong with it.
///
/// Two errors compare equal when their codes are equal, so tests and callers can match on the
/// named statics (`catch let e where e == .truncated`) while logs show the precise message.
/// Thread rule: a value type, freely sendable. Cost: building one formats a short message string,
/// so parsers only build them on the failure path.
public struct RTPError: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The stable code (one of the named statics below).
    public let rawValue: Int32
    /// What exactly was wrong, naming the input ("RTP packet of 11 bytes is shorter than ...").
    public let message: String

    /// Makes an error with the given code and an empty message.
    public init(rawValue: Int32) { self.rawValue = rawValue; self.message = "" }

    /// Makes an error with a code and a message.
    public init(_ code: RTPError, _ message: String) { self.rawValue = code.rawValue; self.message = message }

    /// Equal when the codes (raw values) are equal.
    public static func == (a: RTPError, b: RTPError) -> Bool { a.rawValue == b.rawValue }
    /// Hashes what `==` compares.
    public func hash(into h: inout Hasher) { h.combine(rawValue) }

    /// A readable description, for logs and error messages.
    public var description: String {
        message.isEmpty ? "RTPError(\(rawValue)): \(name)" : "\(name): \(message)"
    }

    private var name: String {
        switch self {
        case .truncated: "truncated"
        case .badVersion: "badVersion"
        case .csrcOverrun: "csrcOverrun"
        case .extensionOverrun: "extensionOverrun"
        case .badExtensionElement: "badExtensionElement"
        case .extensionCapacity: "extensionCapacity"
        case .badPadding: "badPadding"
        case .badPayloadDescriptor: "badPayloadDescriptor"
        case .badRTCPLength: "badRTCPLength"
        case .badRTCPPacket: "badRTCPPacket"
        case .wrongPacketType: "wrongPacketType"
        case .emptyPayload: "emptyPayload"
        default: "unknown"
        }
    }

    /// The buffer ends before a field that its own header announces (RFC 3550 §5.1 fixed header,
    /// a payload descriptor, an RTCP block). Like `EMSGSIZE` read the other way round.
    public static let truncated = RTPError(rawValue: 1)
    /// The version field is not 2 (RFC 3550 §5.1 "V").
    public static let badVersion = RTPError(rawValue: 2)
    /// The CSRC count (RFC 3550 §5.1 "CC") announces more CSRC words than the packet holds.
    public static let csrcOverrun = RTPError(rawValue: 3)
    /// The header extension length (RFC 3550 §5.3.1) runs past the end of the packet.
    public static let extensionOverrun = RTPError(rawValue: 4)
    /// An RFC 8285 extension element is malformed (its length runs past the extension block, or a
    /// one-byte element has the reserved ID 15 with data).
    public static let badExtensionElement = RTPError(rawValue: 5)
    /// A header extension block holds more elements or bytes than `RTPHeaderExtensions` stores
    /// inline (see its `maxElements` and `maxDataBytes`).
    public static let extensionCapacity = RTPError(rawValue: 6)
    /// The padding count (RFC 3550 §5.1 "P", last octet) is zero or larger than the payload.
    public static let badPadding = RTPError(rawValue: 7)
    /// A payload descriptor (RFC 7741 §4.2, RFC 9628 §4.2) is malformed or inconsistent.
    public static let badPayloadDescriptor = RTPError(rawValue: 8)
    /// An RTCP length field (RFC 3550 §6.4.1 "length") is zero-sized, runs past the datagram or
    /// disagrees with the packet's own counts.
    public static let badRTCPLength = RTPError(rawValue: 9)
    /// An RTCP packet is malformed in a way other than its length (bad version, bad FMT for its
    /// type, an SDES item overrunning its chunk).
    public static let badRTCPPacket = RTPError(rawValue: 10)
    /// The packet is valid but not of the type the caller asked to parse (e.g. an RR given to the
    /// SR parser).
    public static let wrongPacketType = RTPError(rawValue: 11)
    /// The RTP payload is empty where the payload format needs at least one byte.
    public static let emptyPayload = RTPError(rawValue: 12)
}
