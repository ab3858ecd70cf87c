import MediaBase

#if canImport(Glibc)
    import Glibc
#endif

/// `o=` (RFC 8866 §5.2): who made the session description and which version of it this is.
public struct SDPOrigin: Hashable, Sendable {
    /// `-` unless a user name matters.
    public var username: String = "-"
    /// `<sess-id>`: a numeric identifier unique to this session.
    public var sessionID: UInt64
    /// `<sess-version>`: increased each time the description changes.
    public var sessionVersion: UInt64
    /// `<nettype>`: `IN` (Internet).
    public var networkType: String = "IN"
    /// `<addrtype>`: `IP4` or `IP6`.
    public var addressType: String = "IP4"
    /// `<unicast-address>`: the address of the machine that made the description.
    public var address: String

    /// An origin; `sessionID` should be unique (a random or NTP-time number).
    public init(
        username: String = "-", sessionID: UInt64, sessionVersion: UInt64 = 1,
        addressType: String = "IP4", address: String
    ) {
        self.username = username; self.sessionID = sessionID; self.sessionVersion = sessionVersion
        self.addressType = addressType; self.address = address
    }
}

/// `c=` (RFC 8866 §5.7): where media is sent: `IN IP4 127.0.0.1`, optionally `/ttl` for multicast.
public struct SDPConnection: Hashable, Sendable {
    /// `IN`, then `IP4` or `IP6`.
    public var networkType: String = "IN"
    /// `IP4` or `IP6`.
    public var addressType: String
    /// The address, with any `/ttl/count` suffix as written.
    public var address: String

    /// A connection line for `address`.
    public init(addressType: String = "IP4", address: String) {
        self.addressType = addressType; self.address = address
    }
}

/// `b=` (RFC 8866 §5.8): `AS:2000` (kb/s) or `TIAS:...`.
public struct SDPBandwidth: Hashable, Sendable {
    /// `AS`, `TIAS` or `CT`: the bandwidth modifier type.
    public var type: String
    /// The bandwidth, in the unit its type defines (kilobits per second for `AS` and `CT`, bits per second for `TIAS`).
    public var value: Int
    /// A bandwidth line.
    public init(type: String, value: Int) { self.type = type; self.value = value }
}

/// A generic `a=name[:value]` attribute (RFC 8866 §5.13).
public struct SDPAttribute: Hashable, Sendable {
    /// Attribute name.
    public var name: String
    /// The value after the colon; nil for a flag attribute (`a=name`).
    public var value: String?
    /// `a=name` or `a=name:value`.
    public init(_ name: String, _ value: String? = nil) { self.name = name; self.value = value }
    package var line: String { value.map { "a=\(name):\($0)" } ?? "a=\(name)" }
}

/// `a=rtpmap:<pt> <encoding>/<clock rate>[/<channels>]` (RFC 8866 §6.6): `96 VP8/90000`, `111 opus/48000/2`.
public struct SDPRTPMap: Hashable, Sendable {
    /// Payload type (0-127).
    public var payloadType: Int
    /// Encoding name as written (`VP8`, `opus`).
    public var encoding: String
    /// RTP clock rate in hertz (90000 for video, 48000 for Opus).
    public var clockRate: Int
    /// Encoding parameters: the channel count for audio (`2` for Opus, RFC 7587 §7).
    public var channels: Int?
    /// An rtpmap line.
    public init(payloadType: Int, encoding: String, clockRate: Int, channels: Int? = nil) {
        self.payloadType = payloadType; self.encoding = encoding; self.clockRate = clockRate; self.channels = channels
    }
}

/// `a=fmtp:<pt> <parameters>` (RFC 8866 §6.15): `111 minptime=10;useinbandfec=1`.
public struct SDPFormatParameters: Hashable, Sendable {
    /// Payload type the parameters apply to.
    public var payloadType: Int
    /// The parameters as written (after the payload type).
    public var parameters: String
    /// An fmtp line.
    public init(payloadType: Int, parameters: String) { self.payloadType = payloadType; self.parameters = parameters }

    /// The `key=value` pairs of the usual `;`-separated form.
    public var pairs: [(key: String, value: String)] {
        parameters.split(separator: ";").map { item in
            // Empty pieces kept: a bare "=" is the key "" with the value "", not no pair at all.
            let kv = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(kv[0]).trimmingWhitespace, kv.count > 1 ? String(kv[1]).trimmingWhitespace : "")
        }
    }

    /// The value of `key`, if present.
    public func value(for key: String) -> String? { pairs.first { $0.key == key }?.value }
}

/// `a=rtcp-fb:<pt|*> <type> [<parameter>]` (RFC 4585 §4.2; RFC 5104 for `ccm fir`; `goog-remb`):
/// the RTCP feedback a receiver understands.
public struct SDPRTCPFeedback: Hashable, Sendable {
    /// The payload type it applies to, nil for `*` (all).
    public var payloadType: Int?
    /// `nack`, `ccm`, `goog-remb`, `transport-cc`, `trr-int`...
    public var type: String
    /// `pli` for `nack pli`, `fir` for `ccm fir`.
    public var parameter: String?
    /// A feedback line; `nil` payload type means `*`.
    public init(payloadType: Int?, type: String, parameter: String? = nil) {
        self.payloadType = payloadType; self.type = type; self.parameter = parameter
    }
    /// `nack` (RFC 4585 generic NACK).
    public static func nack(_ pt: Int?) -> SDPRTCPFeedback { .init(payloadType: pt, type: "nack") }
    /// `nack pli` (picture loss indication).
    public static func pli(_ pt: Int?) -> SDPRTCPFeedback { .init(payloadType: pt, type: "nack", parameter: "pli") }
    /// `ccm fir` (RFC 5104 full intra request).
    public static func fir(_ pt: Int?) -> SDPRTCPFeedback { .init(payloadType: pt, type: "ccm", parameter: "fir") }
    /// `goog-remb` (receiver estimated maximum bitrate).
    public static func remb(_ pt: Int?) -> SDPRTCPFeedback { .init(payloadType: pt, type: "goog-remb") }
}

/// `a=extmap:<id>[/<direction>] <uri> [<attributes>]` (RFC 8285 §8): an RTP header extension and
/// the local identifier it uses (1-14 for one-byte headers, up to 255 for two-byte).
public struct SDPExtensionMap: Hashable, Sendable {
    /// Local identifier of the extension (1-14 one-byte, up to 255 two-byte).
    public var id: Int
    /// Direction the extension is used in, when the line gives one.
    public var direction: SDPDirection?
    /// URI naming the header extension.
    public var uri: String
    /// Extension attributes after the URI, as written; nil when there are none.
    public var attributes: String?
    /// An extmap line.
    public init(id: Int, direction: SDPDirection? = nil, uri: String, attributes: String? = nil) {
        self.id = id; self.direction = direction; self.uri = uri; self.attributes = attributes
    }
    /// RFC 6464 client-to-mixer audio level.
    public static let audioLevelURI = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"
    /// RFC 5285 example absolute send time used by libwebrtc.
    public static let absoluteSendTimeURI = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    /// Transport-wide congestion control sequence numbers.
    public static let transportSequenceNumberURI =
        "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
}

/// `a=ssrc:<ssrc> <attribute>[:<value>]` (RFC 5576 §4.1): `a=ssrc:1234 cname:revue`.
public struct SDPSSRCAttribute: Hashable, Sendable {
    /// The SSRC the attribute describes.
    public var ssrc: UInt32
    /// Attribute name (`cname`, `msid`).
    public var attribute: String
    /// Attribute value; nil when the line has none.
    public var value: String?
    /// An ssrc line.
    public init(ssrc: UInt32, attribute: String, value: String? = nil) {
        self.ssrc = ssrc; self.attribute = attribute; self.value = value
    }
}

/// `a=ssrc-group:<semantics> <ssrc>...` (RFC 5576 §4.2): SSRCs of one media section that belong
/// together; `FID` (RFC 5576 §4.2, RFC 4588 §8) pairs a media SSRC with its retransmission SSRC.
public struct SDPSSRCGroup: Hashable, Sendable {
    /// `FID`, `FEC`, `SIM`...
    public var semantics: String
    /// The SSRCs in order (for `FID`: the media SSRC, then the RTX SSRC).
    public var ssrcs: [UInt32]
    /// An ssrc-group line.
    public init(semantics: String, ssrcs: [UInt32]) { self.semantics = semantics; self.ssrcs = ssrcs }
}

/// Media direction attributes (RFC 8866 §6.7).
public enum SDPDirection: String, Hashable, Sendable, CaseIterable {
    case sendrecv, sendonly, recvonly, inactive
}

/// `a=crypto:<tag> <suite> inline:<key||salt base64>[|lifetime][|MKI:length] [session params]`
/// (RFC 4568 §9.1): SDES keying for SRTP. ffmpeg 5.1 only accepts the AES_CM_128_HMAC_SHA1_80 and
/// _32 suites here and only a bare `inline:` key (no lifetime or MKI).
public struct SDPCrypto: Hashable, Sendable {
    /// One `inline:` key parameter (RFC 4568 §6.1).
    public struct InlineKey: Hashable, Sendable {
        /// Master key followed by master salt.
        public var keyAndSalt: [UInt8]
        /// `|2^31` style lifetime as written, if any.
        public var lifetime: String?
        /// `|1:4` MKI value and length, if any.
        public var mki: String?
        /// An inline key; `lifetime` and `mki` as written (`2^31`, `1:4`).
        public init(keyAndSalt: [UInt8], lifetime: String? = nil, mki: String? = nil) {
            self.keyAndSalt = keyAndSalt; self.lifetime = lifetime; self.mki = mki
        }
        var text: String {
            var s = "inline:" + Base64.encode(keyAndSalt)
            if let l = lifetime { s += "|" + l }
            if let m = mki { s += "|" + m }
            return s
        }
    }

    /// The tag (a decimal number identifying this crypto line in an offer/answer).
    public var tag: Int
    /// `AES_CM_128_HMAC_SHA1_80`, `AES_CM_128_HMAC_SHA1_32`, `AEAD_AES_128_GCM`, `AEAD_AES_256_GCM`...
    public var suite: String
    /// The `inline:` key parameters (one or more keys with their lifetime and MKI).
    public var keys: [InlineKey]
    /// Session parameters (`UNENCRYPTED_SRTCP`, `KDR=...`), as written.
    public var sessionParameters: [String]

    /// A crypto line with any number of keys and session parameters.
    public init(tag: Int = 1, suite: String, keys: [InlineKey], sessionParameters: [String] = []) {
        self.tag = tag; self.suite = suite; self.keys = keys; self.sessionParameters = sessionParameters
    }

    /// One bare inline key: what ffmpeg and most peers accept.
    public init(tag: Int = 1, suite: String, keyAndSalt: [UInt8]) {
        self.init(tag: tag, suite: suite, keys: [InlineKey(keyAndSalt: keyAndSalt)])
    }

    /// Bytes of master key + salt a suite needs (RFC 4568 §6.2, RFC 7714 §12, RFC 6188), nil for
    /// suites this reader does not know (accepted without a length check).
    public static func keyAndSaltLength(suite: String) -> Int? {
        switch suite {
        case "AES_CM_128_HMAC_SHA1_80", "AES_CM_128_HMAC_SHA1_32", "F8_128_HMAC_SHA1_80": return 30
        case "AES_192_CM_HMAC_SHA1_80", "AES_192_CM_HMAC_SHA1_32": return 38
        case "AES_256_CM_HMAC_SHA1_80", "AES_256_CM_HMAC_SHA1_32": return 46
        case "AEAD_AES_128_GCM": return 28
        case "AEAD_AES_256_GCM": return 44
        default: return nil
        }
    }

    var value: String {
        var s = "\(tag) \(suite) " + keys.map(\.text).joined(separator: ";")
        for p in sessionParameters { s += " " + p }
        return s
    }
}

/// One `m=` section (RFC 8866 §5.14) with the attributes this engine reads and writes typed, the
/// rest kept as `otherAttributes`.
public struct SDPMediaDescription: Hashable, Sendable {
    /// `audio`, `video`, `application`...
    public var type: String
    /// Transport port of the media (0 for a rejected or disabled section).
    public var port: Int
    /// `m=video 5004/2 ...` port count, if given.
    public var portCount: Int?
    /// `RTP/SAVP` for SRTP (RFC 3711), `RTP/AVP`, `RTP/SAVPF`...
    public var proto: String
    /// The formats: RTP payload types for RTP protocols.
    public var formats: [String]
    /// `i=` media title.
    public var title: String?
    /// Media-level `c=` line, overriding the session's.
    public var connection: SDPConnection?
    /// Media-level `b=` lines.
    public var bandwidths: [SDPBandwidth] = []
    /// `a=rtpmap:` lines: payload type to encoding and clock rate.
    public var rtpMaps: [SDPRTPMap] = []
    /// `a=fmtp:` lines: format parameters per payload type.
    public var formatParameters: [SDPFormatParameters] = []
    /// `a=rtcp-fb:` lines: RTCP feedback each payload type accepts (RFC 4585).
    public var rtcpFeedback: [SDPRTCPFeedback] = []
    /// `a=crypto:` lines: SDES SRTP keying (RFC 4568).
    public var crypto: [SDPCrypto] = []
    /// `a=extmap:` lines: RTP header extension IDs (RFC 8285).
    public var extensionMaps: [SDPExtensionMap] = []
    /// `a=ssrc:` lines: attributes of each SSRC (RFC 5576).
    public var ssrcs: [SDPSSRCAttribute] = []
    /// `a=ssrc-group:` lines (RFC 5576 §4.2).
    public var ssrcGroups: [SDPSSRCGroup] = []
    /// `a=sendrecv`, `a=sendonly`, `a=recvonly` or `a=inactive`; nil when the section has none.
    public var direction: SDPDirection?
    /// `a=rtcp-mux` (RFC 5761): RTCP on the RTP port.
    public var rtcpMux = false
    /// `a=mid:` (RFC 5888).
    public var mid: String?
    /// Every other `a=` line, in order.
    public var otherAttributes: [SDPAttribute] = []

    /// A media section with formats and no attributes.
    public init(type: String, port: Int, proto: String = "RTP/SAVP", formats: [String]) {
        self.type = type; self.port = port; self.proto = proto; self.formats = formats
    }

    /// An RTP media section with one payload type and its rtpmap: `m=video 5004 RTP/SAVP 96` +
    /// `a=rtpmap:96 VP8/90000`.
    public init(
        type: String, port: Int, proto: String = "RTP/SAVP", payloadType: Int,
        encoding: String, clockRate: Int, channels: Int? = nil
    ) {
        self.init(type: type, port: port, proto: proto, formats: [String(payloadType)])
        rtpMaps = [SDPRTPMap(payloadType: payloadType, encoding: encoding, clockRate: clockRate, channels: channels)]
    }

    /// The formats that are payload type numbers.
    public var payloadTypes: [Int] { formats.compactMap { Int($0) } }

    /// The rtpmap of `payloadType`, if any.
    public func rtpMap(for payloadType: Int) -> SDPRTPMap? { rtpMaps.first { $0.payloadType == payloadType } }

    /// The fmtp of `payloadType`, if any.
    public func formatParameters(for payloadType: Int) -> SDPFormatParameters? {
        formatParameters.first { $0.payloadType == payloadType }
    }

    /// Adds RFC 4588 retransmission for payload type `apt`: payload type `rtx` in the formats,
    /// `a=rtpmap:<rtx> rtx/<apt's clock rate>`, `a=fmtp:<rtx> apt=<apt>` and, with SSRCs,
    /// `a=ssrc-group:FID <media> <rtx>` (RFC 4588 §8) plus the RTX SSRC's `cname` (copied from
    /// the media SSRC's). Traps when `apt` has no rtpmap (programmer error).
    public mutating func addRetransmission(
        payloadType rtx: Int, for apt: Int, mediaSSRC: UInt32? = nil,
        rtxSSRC: UInt32? = nil
    ) {
        guard let map = rtpMap(for: apt) else { preconditionFailure("no rtpmap for payload type \(apt)") }
        precondition((0...127).contains(rtx) && rtx != apt, "RTX payload type \(rtx) out of range or equal to \(apt)")
        formats.append(String(rtx))
        rtpMaps.append(SDPRTPMap(payloadType: rtx, encoding: "rtx", clockRate: map.clockRate))
        formatParameters.append(SDPFormatParameters(payloadType: rtx, parameters: "apt=\(apt)"))
        if let mediaSSRC, let rtxSSRC {
            ssrcGroups.append(SDPSSRCGroup(semantics: "FID", ssrcs: [mediaSSRC, rtxSSRC]))
            if let cname = ssrcs.first(where: { $0.ssrc == mediaSSRC && $0.attribute == "cname" }) {
                ssrcs.append(SDPSSRCAttribute(ssrc: rtxSSRC, attribute: "cname", value: cname.value))
            }
        }
    }

    /// The RFC 4588 retransmission payload type negotiated for `apt` (an `rtx` rtpmap whose fmtp
    /// says `apt=<apt>`), if any.
    public func retransmissionPayloadType(for apt: Int) -> Int? {
        rtpMaps.first { m in
            m.encoding.lowercased() == "rtx" && formatParameters(for: m.payloadType)?.value(for: "apt") == String(apt)
        }?.payloadType
    }

    /// The retransmission SSRC paired with `mediaSSRC` by `a=ssrc-group:FID`, if any.
    public func retransmissionSSRC(for mediaSSRC: UInt32) -> UInt32? {
        ssrcGroups.first { $0.semantics == "FID" && $0.ssrcs.count == 2 && $0.ssrcs[0] == mediaSSRC }?.ssrcs[1]
    }

    var lines: [String] {
        var out: [String] = []
        let portText = portCount.map { "\(port)/\($0)" } ?? "\(port)"
        out.append("m=\(type) \(portText) \(proto) \(formats.joined(separator: " "))")
        if let t = title { out.append("i=\(t)") }
        if let c = connection { out.append("c=\(c.networkType) \(c.addressType) \(c.address)") }
        for b in bandwidths { out.append("b=\(b.type):\(b.value)") }
        for m in rtpMaps {
            out.append("a=rtpmap:\(m.payloadType) \(m.encoding)/\(m.clockRate)" + (m.channels.map { "/\($0)" } ?? ""))
        }
        for f in formatParameters { out.append("a=fmtp:\(f.payloadType) \(f.parameters)") }
        for f in rtcpFeedback {
            out.append("a=rtcp-fb:\(f.payloadType.map(String.init) ?? "*") \(f.type)" + (f.parameter.map { " \($0)" } ?? ""))
        }
        for e in extensionMaps {
            out.append(
                "a=extmap:\(e.id)" + (e.direction.map { "/\($0.rawValue)" } ?? "") + " \(e.uri)"
                    + (e.attributes.map { " \($0)" } ?? ""))
        }
        for c in crypto { out.append("a=crypto:\(c.value)") }
        if let d = direction { out.append("a=\(d.rawValue)") }
        if rtcpMux { out.append("a=rtcp-mux") }
        if let m = mid { out.append("a=mid:\(m)") }
        for g in ssrcGroups { out.append("a=ssrc-group:\(g.semantics) " + g.ssrcs.map(String.init).joined(separator: " ")) }
        for s in ssrcs { out.append("a=ssrc:\(s.ssrc) \(s.attribute)" + (s.value.map { ":\($0)" } ?? "")) }
        for a in otherAttributes { out.append(a.line) }
        return out
    }
}

/// A session description (RFC 8866) as this engine writes it for `revue-media send --sdp` and reads
/// it for `receive --sdp`: `v= o= s= c= t=`, then `m=` sections with SRTP keying (RFC 4568).
/// Serialized with CRLF line ends; parsing accepts CRLF or LF and rejects malformed lines with
/// their line number.
/// Thread rule: a value type. Cost: parsing and serializing are linear in the text.
public struct SDPSessionDescription: Hashable, Sendable {
    /// `o=`.
    public var origin: SDPOrigin
    /// `s=`; RFC 8866 requires a non-empty name (`-` when there is none).
    public var sessionName: String
    /// `i=` session information.
    public var information: String?
    /// Session-level `c=` line, used by media sections that have none.
    public var connection: SDPConnection?
    /// Session-level `b=` lines.
    public var bandwidths: [SDPBandwidth] = []
    /// Start time of the `t=` line (NTP seconds; 0 means unbounded).
    public var startTime: UInt64 = 0
    /// Stop time of the `t=` line (NTP seconds; 0 means unbounded).
    public var stopTime: UInt64 = 0
    /// Session-level `a=` lines (`a=tool:`, `a=group:`...).
    public var attributes: [SDPAttribute] = []
    /// Other session-level lines kept as `(type, value)`: `u=`, `e=`, `p=`, `r=`, `z=`, `k=`.
    public var otherFields: [SDPField] = []
    /// The `m=` sections, in order.
    public var media: [SDPMediaDescription] = []

    /// A description with `v=0`, `t=0 0` and the given lines.
    public init(
        origin: SDPOrigin, sessionName: String = "Revue", connection: SDPConnection? = nil,
        media: [SDPMediaDescription] = []
    ) {
        self.origin = origin; self.sessionName = sessionName; self.connection = connection; self.media = media
    }

    /// The description as text, CRLF line ends, ending with CRLF.
    public var text: String {
        var out = [
            "v=0",
            "o=\(origin.username) \(origin.sessionID) \(origin.sessionVersion) \(origin.networkType) \(origin.addressType) \(origin.address)",
            "s=\(sessionName.isEmpty ? "-" : sessionName)",
        ]
        if let i = information { out.append("i=\(i)") }
        for f in otherFields where "uep".contains(f.type) { out.append("\(f.type)=\(f.value)") }
        if let c = connection { out.append("c=\(c.networkType) \(c.addressType) \(c.address)") }
        for b in bandwidths { out.append("b=\(b.type):\(b.value)") }
        out.append("t=\(startTime) \(stopTime)")
        for f in otherFields where !"uep".contains(f.type) { out.append("\(f.type)=\(f.value)") }
        for a in attributes { out.append(a.line) }
        for m in media { out.append(contentsOf: m.lines) }
        return out.joined(separator: "\r\n") + "\r\n"
    }

    /// Parses `text`; `source` (a file name, `"<sdp>"`) names the input in errors, which read like
    /// `stream.sdp: line 7: a=rtpmap: clock rate "x" is not a number`.
    public init(parsing text: String, source: String = "<sdp>") throws(ContainerError) {
        var parser = SDPParser(source: source)
        self = try parser.parse(text)
    }

    /// Reads and parses an SDP file (at most 1 MiB).
    public static func read(path: String) throws(ContainerError) -> SDPSessionDescription {
        let file = try ContainerFileReader(path: path)
        let bytes = try file.readBytes(1 << 20)
        if bytes.count == 1 << 20, try file.readByte() != nil {
            throw ContainerError(.tooLarge, path: path, "is larger than 1 MiB: not a session description")
        }
        if bytes.isEmpty { throw ContainerError(.truncated, path: path, "file is empty (no session description)") }
        return try SDPSessionDescription(parsing: String(decoding: bytes, as: UTF8.self), source: path)
    }

    /// Writes the description to `path` atomically.
    public func write(to path: String) throws(ContainerError) {
        let file = try ContainerFileWriter(path: path)
        try file.write(Array(text.utf8))
        try file.finish()
    }
}

/// A description line kept as it was: its one-letter type and value.
public struct SDPField: Hashable, Sendable {
    /// The line type letter.
    public var type: Character
    /// The text after `=`.
    public var value: String
    /// A kept line.
    public init(type: Character, value: String) { self.type = type; self.value = value }
}

/// The line parser behind `SDPSessionDescription(parsing:)` (RFC 8866 §5, §9 grammar, leniently:
/// unknown attributes are kept, `\n` line ends accepted).
package struct SDPParser {
    package let source: String
    package var lineNumber = 0

    package init(source: String) { self.source = source }

    package func fail(_ message: String) -> ContainerError {
        ContainerError(.malformed, path: source, "line \(lineNumber): \(message)")
    }

    package func int(_ s: Substring, _ what: String, _ range: ClosedRange<Int>) throws(ContainerError) -> Int {
        guard let v = Int(s), range.contains(v) else {
            throw fail("\(what) \"\(s)\" is not a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    package func connection(_ value: Substring) throws(ContainerError) -> SDPConnection {
        let f = value.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count == 3 else { throw fail("c= needs <nettype> <addrtype> <address>, got \"\(value)\"") }
        var c = SDPConnection(addressType: String(f[1]), address: String(f[2]))
        c.networkType = String(f[0])
        return c
    }

    package func bandwidth(_ value: Substring) throws(ContainerError) -> SDPBandwidth {
        let f = value.split(separator: ":", maxSplits: 1)
        guard f.count == 2, !f[0].isEmpty else { throw fail("b= needs <type>:<bandwidth>, got \"\(value)\"") }
        return SDPBandwidth(type: String(f[0]), value: try int(f[1], "bandwidth", 0...Int(Int32.max)))
    }

    package mutating func parse(_ text: String) throws(ContainerError) -> SDPSessionDescription {
        var session = SDPSessionDescription(origin: SDPOrigin(sessionID: 0, address: ""), sessionName: "")
        var sawVersion = false, sawOrigin = false, sawName = false, sawTiming = false
        var current: SDPMediaDescription?
        // "\r\n" is one Character in Swift: split on it and on a bare "\n".
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (i, rawLine) in lines.enumerated() {
            lineNumber = i + 1
            var line = rawLine
            if line.last == "\r" { line.removeLast() }
            // RFC 8866 §9: a value never holds CR; a stray one (as in "\r\r\n") would be written
            // back as a different line.
            if line.contains("\r") { throw fail("stray carriage return inside the line") }
            if line.isEmpty {
                if i == lines.count - 1 { break }
                throw fail("empty line")
            }
            let chars = Array(line.utf8.prefix(2))
            guard chars.count == 2, chars[1] == UInt8(ascii: "="), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(chars[0])
            else {
                throw fail("expected <type>=<value>, got \"\(line.prefix(40))\"")
            }
            let type = Character(Unicode.Scalar(chars[0]))
            let value = line.dropFirst(2)
            if !sawVersion {
                guard type == "v" else { throw fail("a session description must start with v=0") }
                guard value == "0" else { throw fail("unsupported SDP version v=\(value) (only 0)") }
                sawVersion = true
                continue
            }
            switch type {
            case "v": throw fail("v= appears twice")
            case "o":
                let f = value.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count == 6 else { throw fail("o= needs 6 fields, got \(f.count)") }
                guard let id = UInt64(f[1]), let version = UInt64(f[2]) else {
                    throw fail("o= session id and version must be numbers")
                }
                var o = SDPOrigin(
                    username: String(f[0]), sessionID: id, sessionVersion: version,
                    addressType: String(f[4]), address: String(f[5]))
                o.networkType = String(f[3])
                session.origin = o
                sawOrigin = true
            case "s":
                session.sessionName = String(value)
                sawName = true
            case "i":
                if current != nil { current!.title = String(value) } else { session.information = String(value) }
            case "c":
                let c = try connection(value)
                if current != nil { current!.connection = c } else { session.connection = c }
            case "b":
                let b = try bandwidth(value)
                if current != nil { current!.bandwidths.append(b) } else { session.bandwidths.append(b) }
            case "t":
                let f = value.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count == 2, let start = UInt64(f[0]), let stop = UInt64(f[1]) else {
                    throw fail("t= needs <start> <stop> numbers, got \"\(value)\"")
                }
                session.startTime = start; session.stopTime = stop
                sawTiming = true
            case "m":
                guard sawOrigin && sawName && sawTiming else {
                    throw fail("m= before the session's o=, s= and t= lines")
                }
                if let m = current { session.media.append(m) }
                let f = value.split(separator: " ", omittingEmptySubsequences: true)
                guard f.count >= 4 else { throw fail("m= needs <media> <port> <proto> <fmt>..., got \"\(value)\"") }
                let portParts = f[1].split(separator: "/", omittingEmptySubsequences: false)
                guard portParts.count <= 2 else { throw fail("m= port \"\(f[1])\" is malformed") }
                var m = SDPMediaDescription(
                    type: String(f[0]), port: try int(portParts[0], "m= port", 0...65535),
                    proto: String(f[2]), formats: f[3...].map(String.init))
                if portParts.count == 2 { m.portCount = try int(portParts[1], "m= port count", 1...65535) }
                // RTP/AVP, RTP/SAVP, and the RFC 5764 DTLS forms (UDP/TLS/RTP/SAVPF) that WebRTC uses.
                if m.proto.split(separator: "/").contains("RTP") {
                    for fmt in f[3...] { _ = try int(fmt, "m= payload type", 0...127) }
                }
                current = m
            case "a":
                let (name, attrValue) = Self.splitAttribute(value)
                if current != nil {
                    try mediaAttribute(name, attrValue, into: &current!)
                } else {
                    session.attributes.append(SDPAttribute(String(name), attrValue.map(String.init)))
                }
            case "u", "e", "p", "r", "z", "k":
                if current == nil {
                    session.otherFields.append(SDPField(type: type, value: String(value)))
                } else if type != "k" {
                    throw fail("\(type)= is not allowed in a media section")
                }
            // k= (obsolete, RFC 8866 §5.12) in a media section is ignored.
            default:
                throw fail("unknown line type \(type)=")
            }
        }
        lineNumber = lines.count
        if !sawVersion { throw fail("empty session description (no v=0)") }
        guard sawOrigin else { throw fail("missing o= line") }
        guard sawName else { throw fail("missing s= line") }
        guard sawTiming else { throw fail("missing t= line") }
        if let m = current { session.media.append(m) }
        return session
    }

    package static func splitAttribute(_ value: Substring) -> (Substring, Substring?) {
        guard let colon = value.firstIndex(of: ":") else { return (value, nil) }
        return (value[..<colon], value[value.index(after: colon)...])
    }

    package mutating func mediaAttribute(
        _ name: Substring, _ value: Substring?,
        into m: inout SDPMediaDescription
    ) throws(ContainerError) {
        func need() throws(ContainerError) -> Substring {
            guard let v = value, !v.isEmpty else { throw fail("a=\(name) needs a value") }
            return v
        }
        switch name {
        case "rtpmap":
            let v = try need()
            let f = v.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard f.count == 2 else { throw fail("a=rtpmap needs <payload type> <encoding>/<clock rate>") }
            let pt = try int(f[0], "a=rtpmap: payload type", 0...127)
            let e = f[1].split(separator: "/", omittingEmptySubsequences: false)
            guard e.count >= 2, e.count <= 3, !e[0].isEmpty else {
                throw fail("a=rtpmap: \"\(f[1])\" is not <encoding>/<clock rate>[/<channels>]")
            }
            let rate = try int(e[1], "a=rtpmap: clock rate", 1...Int(UInt32.max))
            let channels = e.count == 3 ? try int(e[2], "a=rtpmap: channel count", 1...255) : nil
            m.rtpMaps.append(SDPRTPMap(payloadType: pt, encoding: String(e[0]), clockRate: rate, channels: channels))
        case "fmtp":
            let v = try need()
            let f = v.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard f.count == 2 else { throw fail("a=fmtp needs <format> <parameters>") }
            let pt = try int(f[0], "a=fmtp: payload type", 0...127)
            m.formatParameters.append(SDPFormatParameters(payloadType: pt, parameters: String(f[1])))
        case "rtcp-fb":
            let v = try need()
            let f = v.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 2 else { throw fail("a=rtcp-fb needs <payload type> <feedback type>") }
            let pt = f[0] == "*" ? nil : try int(f[0], "a=rtcp-fb: payload type", 0...127)
            m.rtcpFeedback.append(
                SDPRTCPFeedback(
                    payloadType: pt, type: String(f[1]),
                    parameter: f.count > 2 ? f[2...].joined(separator: " ") : nil))
        case "extmap":
            let v = try need()
            let f = v.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            guard f.count >= 2 else { throw fail("a=extmap needs <id>[/<direction>] <uri>") }
            let idParts = f[0].split(separator: "/", omittingEmptySubsequences: false)
            guard idParts.count <= 2 else { throw fail("a=extmap: \"\(f[0])\" is not <id>[/<direction>]") }
            let id = try int(idParts[0], "a=extmap: id", 1...255)
            var direction: SDPDirection?
            if idParts.count == 2 {
                guard let d = SDPDirection(rawValue: String(idParts[1])) else {
                    throw fail("a=extmap: unknown direction \"\(idParts[1])\"")
                }
                direction = d
            }
            m.extensionMaps.append(
                SDPExtensionMap(
                    id: id, direction: direction, uri: String(f[1]),
                    attributes: f.count > 2 ? String(f[2]) : nil))
        case "crypto":
            m.crypto.append(try crypto(try need()))
        case "ssrc":
            let v = try need()
            let f = v.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard let ssrc = UInt32(f[0]) else { throw fail("a=ssrc: \"\(f[0])\" is not a 32-bit SSRC") }
            guard f.count == 2 else { throw fail("a=ssrc needs <ssrc> <attribute>[:<value>]") }
            let (attr, val) = Self.splitAttribute(f[1])
            m.ssrcs.append(SDPSSRCAttribute(ssrc: ssrc, attribute: String(attr), value: val.map(String.init)))
        case "ssrc-group":
            let f = try need().split(separator: " ", omittingEmptySubsequences: true)
            guard !f.isEmpty else { throw fail("a=ssrc-group needs <semantics> [<ssrc>...]") }
            var group = SDPSSRCGroup(semantics: String(f[0]), ssrcs: [])
            for t in f.dropFirst() {
                guard let ssrc = UInt32(t) else { throw fail("a=ssrc-group: \"\(t)\" is not a 32-bit SSRC") }
                group.ssrcs.append(ssrc)
            }
            m.ssrcGroups.append(group)
        case "sendrecv", "sendonly", "recvonly", "inactive":
            m.direction = SDPDirection(rawValue: String(name))
        case "rtcp-mux":
            m.rtcpMux = true
        case "mid":
            m.mid = String(try need())
        default:
            m.otherAttributes.append(SDPAttribute(String(name), value.map(String.init)))
        }
    }

    /// RFC 4568 §9.1: `<tag> <suite> <key-params> [<session-params>]`, key-params `inline:...`
    /// separated by `;`.
    package func crypto(_ v: Substring) throws(ContainerError) -> SDPCrypto {
        let f = v.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 3 else { throw fail("a=crypto needs <tag> <crypto-suite> <key-params>") }
        let tag = try int(f[0], "a=crypto: tag", 0...999_999_999)
        let suite = String(f[1])
        var keys: [SDPCrypto.InlineKey] = []
        for param in f[2].split(separator: ";") {
            guard param.hasPrefix("inline:") else {
                throw fail("a=crypto: key parameter \"\(param.prefix(20))\" does not use the inline: method")
            }
            let parts = param.dropFirst(7).split(separator: "|", omittingEmptySubsequences: false)
            guard let bytes = Base64.decode(parts[0]) else { throw fail("a=crypto: key is not valid base64") }
            if let need = SDPCrypto.keyAndSaltLength(suite: suite), bytes.count != need {
                throw fail("a=crypto: \(suite) needs \(need) bytes of key and salt, the key has \(bytes.count)")
            }
            var key = SDPCrypto.InlineKey(keyAndSalt: bytes)
            for extra in parts.dropFirst() {
                if extra.contains(":") { key.mki = String(extra) } else { key.lifetime = String(extra) }
            }
            keys.append(key)
        }
        // RFC 4568 §9.1: key-params = key-param *(";" key-param): at least one (";" alone has none).
        guard !keys.isEmpty else { throw fail("a=crypto: no inline: key parameter") }
        return SDPCrypto(tag: tag, suite: suite, keys: keys, sessionParameters: f.dropFirst(3).map(String.init))
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}

extension SDPCrypto {
    /// Whether ffmpeg 5.1's SDP demuxer can decrypt this line: only the AES_CM_128_HMAC_SHA1_80 and
    /// _32 suites with a single bare `inline:` key (no lifetime, no MKI). It parses other lines
    /// without complaint and then silently receives nothing, so writers should check this.
    public var isSupportedByFFmpeg: Bool {
        (suite == "AES_CM_128_HMAC_SHA1_80" || suite == "AES_CM_128_HMAC_SHA1_32")
            && keys.count == 1 && keys[0].lifetime == nil && keys[0].mki == nil && keys[0].keyAndSalt.count == 30
    }

    /// GStreamer's `srtpenc`/`srtpdec` names for this suite's cipher and authentication
    /// (`aes-128-icm` + `hmac-sha1-80`, `aes-128-gcm` + `null`), nil for suites GStreamer lacks.
    public var gstreamerCipherAndAuth: (cipher: String, auth: String)? {
        switch suite {
        case "AES_CM_128_HMAC_SHA1_80": return ("aes-128-icm", "hmac-sha1-80")
        case "AES_CM_128_HMAC_SHA1_32": return ("aes-128-icm", "hmac-sha1-32")
        case "AES_256_CM_HMAC_SHA1_80": return ("aes-256-icm", "hmac-sha1-80")
        case "AES_256_CM_HMAC_SHA1_32": return ("aes-256-icm", "hmac-sha1-32")
        case "AEAD_AES_128_GCM": return ("aes-128-gcm", "null")
        case "AEAD_AES_256_GCM": return ("aes-256-gcm", "null")
        default: return nil
        }
    }
}

extension SDPMediaDescription {
    /// The caps a GStreamer `udpsrc ! srtpdec` pipeline needs to receive this section's first
    /// payload type (GStreamer's `sdpdemux` keys SRTP only from MIKEY, not from `a=crypto`, so a
    /// receiver sets these caps by hand): `application/x-srtp, media=video, payload=96, ...,
    /// srtp-key=(buffer)<hex>, srtp-cipher=aes-128-icm, ...`. `srtpdec` keys streams by SSRC, so
    /// the section needs an `a=ssrc` line for SRTP caps to work. Without `a=crypto` it returns plain
    /// `application/x-rtp` caps. Nil when there is no rtpmap or the suite is unknown to GStreamer.
    public var gstreamerCaps: String? {
        guard let pt = payloadTypes.first, let map = rtpMap(for: pt) else { return nil }
        var caps =
            "media=(string)\(type), payload=(int)\(pt), clock-rate=(int)\(map.clockRate), "
            + "encoding-name=(string)\(map.encoding.uppercased())"
        if let ch = map.channels, type == "audio" { caps += ", encoding-params=(string)\(ch)" }
        if let ssrc = ssrcs.first?.ssrc { caps += ", ssrc=(uint)\(ssrc)" }
        guard let c = crypto.first else { return "application/x-rtp, " + caps }
        guard let names = c.gstreamerCipherAndAuth, let key = c.keys.first else { return nil }
        let hex = key.keyAndSalt.map { b -> String in
            let s = String(b, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
        caps += ", srtp-key=(buffer)\(hex), srtp-cipher=(string)\(names.cipher), srtp-auth=(string)\(names.auth)"
        caps += ", srtcp-cipher=(string)\(names.cipher), srtcp-auth=(string)\(names.auth)"
        return "application/x-srtp, " + caps
    }
}
