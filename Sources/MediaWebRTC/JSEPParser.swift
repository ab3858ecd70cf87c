// Reading a JSEP session description: the generic SDP grammar first (SDPParser, which types
// rtpmap, fmtp, rtcp-fb, extmap and ssrc lines), then the WebRTC attributes and the rules
// RFC 8829 §5.8 and RFC 8843 put on top, each error naming its line.
import MediaWire

/// A session description a peer sent that cannot be used: the line it is on (number and text)
/// and what is wrong with it. Thread rule: a value type. Cost: none.
public struct JSEPError: Error, Hashable, Sendable, CustomStringConvertible {
    /// 1-based number of the offending line; 0 when the problem is the description as a whole
    /// (empty, too large).
    public var line: Int
    /// The offending line as written (at most 120 characters).
    public var text: String
    /// What is wrong, without the line.
    public var message: String

    /// An error at line `line` (text `text`).
    public init(line: Int, text: String, _ message: String) {
        self.line = line; self.text = String(text.prefix(120)); self.message = message
    }

    /// `line 12 "a=setup:sideways": a=setup must be ...`.
    public var description: String { line > 0 ? "line \(line) \"\(text)\": \(message)" : message }
}

extension JSEPSessionDescription {
    /// The largest description accepted (bytes of UTF-8): browsers' offers are a few kilobytes.
    public static let maximumTextLength = 1 << 20

    /// Parses a description a peer sent (`RTCSessionDescription.sdp`) as an offer or answer.
    /// Accepts CRLF or LF line ends; unknown attributes and codecs are kept, not refused. Throws
    /// a `JSEPError` naming the line for malformed SDP and for what RFC 8829 forbids: a
    /// non-rejected m-section without `a=mid`, ICE credentials, fingerprint or `a=setup`; two
    /// sections with one mid; a BUNDLE group naming a mid that does not exist; an answer with
    /// `a=setup:actpass`; codec lines for payload types the `m=` line does not list.
    /// Cost: linear in the text.
    public init(parsing text: String, type: JSEPType) throws(JSEPError) {
        guard text.utf8.count <= Self.maximumTextLength else {
            throw JSEPError(line: 0, text: "", "the description is \(text.utf8.count) bytes, more than \(Self.maximumTextLength)")
        }
        var parser = JSEPParser(text: text)
        self = try parser.parse(type: type)
    }
}

/// The JSEP reading behind `JSEPSessionDescription(parsing:type:)`. Thread rule: one use, one thread.
struct JSEPParser {
    let text: String
    /// The lines as SDPParser numbers them (split on LF and CRLF, the CR removed).
    let lines: [Substring]

    init(text: String) {
        self.text = text
        lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
            .map { $0.last == "\r" ? $0.dropLast() : $0 }
    }

    func fail(_ index: Int, _ message: String) -> JSEPError {
        JSEPError(line: index + 1, text: lines.indices.contains(index) ? String(lines[index]) : "", message)
    }

    /// Payload types that need no rtpmap (RFC 3551 §6): their encoding, clock rate and channels.
    static let staticPayloadTypes: [Int: (String, Int, Int?)] = [
        0: ("PCMU", 8000, nil), 3: ("GSM", 8000, nil), 4: ("G723", 8000, nil), 8: ("PCMA", 8000, nil),
        9: ("G722", 8000, nil), 13: ("CN", 8000, nil), 18: ("G729", 8000, nil), 26: ("JPEG", 90_000, nil),
        31: ("H261", 90_000, nil), 32: ("MPV", 90_000, nil), 34: ("H263", 90_000, nil),
    ]

    /// Attribute names this model types itself (the rest go to `otherAttributes`).
    static let typedNames: Set<Substring> = [
        "ice-ufrag", "ice-pwd", "ice-options", "fingerprint", "setup", "rtcp-rsize",
        "bundle-only", "msid", "candidate", "end-of-candidates",
    ]

    mutating func parse(type: JSEPType) throws(JSEPError) -> JSEPSessionDescription {
        var sdpParser = SDPParser(source: "<jsep>")
        let sdp: SDPSessionDescription
        do {
            sdp = try sdpParser.parse(text)
        } catch {
            let n = sdpParser.lineNumber
            let prefix = "line \(n): "
            let message = error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message
            throw fail(n - 1, message)
        }
        var d = JSEPSessionDescription(type: type, origin: sdp.origin)
        d.sessionName = sdp.sessionName.isEmpty ? "-" : sdp.sessionName
        // Byte prefixes, as SDPParser tests them ("m=" followed by a combining mark is one
        // Character less than "m=" is).
        let mLines = lines.indices.filter { lines[$0].utf8.starts(with: "m=".utf8) }
        precondition(mLines.count == sdp.media.count, "SDPParser and JSEPParser disagree on m= lines")
        let sessionEnd = mLines.first ?? lines.count

        // Session level.
        var sessionICE = ICEAccumulator()
        var bundleLine: Int?
        var sessionSetupSeen = false
        for i in 0..<sessionEnd where lines[i].utf8.starts(with: "a=".utf8) {
            let (name, value) = SDPParser.splitAttribute(lines[i].dropFirst(2))
            switch name {
            case "group":
                let f = (value ?? "").split(separator: " ", omittingEmptySubsequences: true)
                if f.first == "BUNDLE" && f.count > 1 && bundleLine == nil {
                    bundleLine = i
                    d.bundle = f.dropFirst().map(String.init)
                    if Set(d.bundle).count != d.bundle.count { throw fail(i, "the BUNDLE group names a mid twice") }
                } else {
                    d.otherAttributes.append(SDPAttribute(String(name), value.map(String.init)))
                }
            case "ice-ufrag", "ice-pwd", "ice-options":
                try sessionICE.add(name, value, line: i, self)
            case "fingerprint":
                d.fingerprints.append(try fingerprint(value, line: i))
            case "setup":
                if sessionSetupSeen { throw fail(i, "a=setup appears twice") }
                sessionSetupSeen = true
                d.setup = try setup(value, line: i, type: type)
            case "ice-lite":
                d.iceLite = true
            default:
                d.otherAttributes.append(SDPAttribute(String(name), value.map(String.init)))
            }
        }
        d.ice = try sessionICE.parameters(self)
        d.iceOptions = sessionICE.options

        // Media sections.
        var midLines: [String: Int] = [:]
        for (k, m) in sdp.media.enumerated() {
            let start = mLines[k], end = k + 1 < mLines.count ? mLines[k + 1] : lines.count
            var s = JSEPMediaSection(kind: JSEPMediaKind(rawValue: m.type), port: m.port, proto: m.proto, formats: m.formats)
            s.connection = m.connection
            s.bandwidths = m.bandwidths
            s.rtcpMux = m.rtcpMux
            s.extensions = m.extensionMaps
            s.ssrcs = m.ssrcs
            s.ssrcGroups = m.ssrcGroups
            s.otherAttributes = m.otherAttributes.filter { !Self.typedNames.contains(Substring($0.name)) }
            s.hasDirectionAttribute = m.direction != nil
            s.direction = m.direction ?? .sendrecv

            var ice = ICEAccumulator()
            var rtpmapLines: [Int: Int] = [:]
            var fmtpLines: [Int: Int] = [:]
            var feedbackLines: [(pt: Int, line: Int)] = []
            var extmapIDs: Set<Int> = []
            var directionSeen = false, setupSeen = false, midSeen = false
            for i in start + 1..<end where lines[i].utf8.starts(with: "a=".utf8) {
                let (name, value) = SDPParser.splitAttribute(lines[i].dropFirst(2))
                switch name {
                case "mid":
                    if midSeen { throw fail(i, "a=mid appears twice in one m-section") }
                    midSeen = true
                    let mid = String(value ?? "")
                    guard !mid.contains(" ") else { throw fail(i, "a=mid must be one token") }
                    if let other = midLines[mid] {
                        throw fail(i, "mid \"\(mid)\" is already used by the m-section at line \(other + 1)")
                    }
                    midLines[mid] = start
                    s.mid = mid
                case "sendrecv", "sendonly", "recvonly", "inactive":
                    if directionSeen { throw fail(i, "a second direction attribute in one m-section") }
                    directionSeen = true
                case "ice-ufrag", "ice-pwd", "ice-options":
                    try ice.add(name, value, line: i, self)
                case "fingerprint":
                    s.fingerprints.append(try fingerprint(value, line: i))
                case "setup":
                    if setupSeen { throw fail(i, "a=setup appears twice in one m-section") }
                    setupSeen = true
                    s.setup = try setup(value, line: i, type: type)
                case "rtcp-rsize":
                    s.rtcpReducedSize = true
                case "bundle-only":
                    s.bundleOnly = true
                case "end-of-candidates":
                    s.endOfCandidates = true
                case "msid":
                    let f = (value ?? "").split(separator: " ", omittingEmptySubsequences: true)
                    guard (1...2).contains(f.count) else { throw fail(i, "a=msid needs <stream id> [<track id>]") }
                    s.mediaStreamIDs.append(JSEPMediaStreamID(stream: String(f[0]), track: f.count > 1 ? String(f[1]) : nil))
                case "candidate":
                    guard let c = JSEPCandidate(String(value ?? "")) else {
                        throw fail(
                            i,
                            "a=candidate is not <foundation> <component> <transport> <priority> <address> <port> typ <type> [<name> <value>]... (RFC 8839 §5.1)"
                        )
                    }
                    s.candidates.append(c)
                case "rtpmap":
                    let pt = Self.payloadType(value)
                    if let other = rtpmapLines[pt] {
                        throw fail(i, "payload type \(pt) already has an a=rtpmap at line \(other + 1)")
                    }
                    if !m.formats.contains(String(pt)) { throw fail(i, "payload type \(pt) is not on the m= line") }
                    rtpmapLines[pt] = i
                case "fmtp":
                    let pt = Self.payloadType(value)
                    if let other = fmtpLines[pt] {
                        throw fail(i, "payload type \(pt) already has an a=fmtp at line \(other + 1)")
                    }
                    fmtpLines[pt] = i
                case "rtcp-fb":
                    if let v = value, !v.hasPrefix("*") { feedbackLines.append((Self.payloadType(v), i)) }
                case "extmap":
                    let id = Self.payloadType(value)
                    if !extmapIDs.insert(id).inserted { throw fail(i, "extension id \(id) is mapped twice in one m-section") }
                default:
                    break
                }
            }
            s.ice = try ice.parameters(self)
            s.iceOptions = ice.options

            // Codecs, in m= line order.
            if s.isRTP && (!s.isRejected || !m.rtpMaps.isEmpty) {
                var seen: Set<Int> = []
                for f in m.formats {
                    guard let pt = Int(f), (0...127).contains(pt) else {
                        throw fail(start, "format \"\(f.prefix(20))\" is not an RTP payload type (0...127)")
                    }
                    if !seen.insert(pt).inserted { throw fail(start, "payload type \(pt) is listed twice") }
                    var codec: JSEPCodec
                    if let map = m.rtpMap(for: pt) {
                        codec = JSEPCodec(payloadType: pt, name: map.encoding, clockRate: map.clockRate, channels: map.channels)
                    } else if let st = Self.staticPayloadTypes[pt] {
                        codec = JSEPCodec(payloadType: pt, name: st.0, clockRate: st.1, channels: st.2)
                    } else {
                        throw fail(start, "payload type \(pt) has no a=rtpmap")
                    }
                    codec.parameters = m.formatParameters(for: pt)?.parameters
                    codec.feedback = m.rtcpFeedback.filter { $0.payloadType == pt }
                    s.codecs.append(codec)
                }
                s.formats = s.codecs.map { String($0.payloadType) }
                for (pt, line) in fmtpLines where !seen.contains(pt) {
                    throw fail(line, "a=fmtp for payload type \(pt), which the m= line does not list")
                }
                for (pt, line) in feedbackLines where !seen.contains(pt) {
                    throw fail(line, "a=rtcp-fb for payload type \(pt), which the m= line does not list")
                }
                for c in s.codecs where c.name.lowercased() == "rtx" {
                    if let apt = c.associatedPayloadType, s.codec(payloadType: apt) == nil {
                        throw fail(
                            fmtpLines[c.payloadType] ?? start,
                            "retransmission payload type \(c.payloadType) repairs \(apt), which the m= line does not list")
                    }
                }
            }
            s.wildcardFeedback = m.rtcpFeedback.filter { $0.payloadType == nil }
            d.media.append(s)
        }

        // Rules across sections (RFC 8829 §5.8, RFC 8843).
        if let b = bundleLine {
            for mid in d.bundle where midLines[mid] == nil {
                throw fail(b, "the BUNDLE group names mid \"\(mid)\", which no m-section has")
            }
        }
        for (k, s) in d.media.enumerated() where !s.isRejected {
            let at = mLines[k]
            guard s.mid != nil else { throw fail(at, "the m-section has no a=mid (RFC 8829 §5.2.1)") }
            if s.bundleOnly { continue }
            if s.kind == .application && !s.isRTP || s.isRTP {
                guard d.effectiveICE(of: s) != nil else { throw fail(at, "the m-section has no a=ice-ufrag and a=ice-pwd") }
                guard !d.effectiveFingerprints(of: s).isEmpty else { throw fail(at, "the m-section has no a=fingerprint") }
                guard d.effectiveSetup(of: s) != nil else { throw fail(at, "the m-section has no a=setup") }
            }
        }
        return d
    }

    /// The leading number of an attribute value SDPParser already checked (`96 VP8/90000`).
    static func payloadType(_ value: Substring?) -> Int {
        let v = value ?? ""
        let digits = v.prefix { $0.isASCII && $0.isNumber }
        return Int(digits) ?? -1
    }

    func fingerprint(_ value: Substring?, line i: Int) throws(JSEPError) -> JSEPFingerprint {
        let f = (value ?? "").split(separator: " ", omittingEmptySubsequences: true)
        guard f.count == 2 else { throw fail(i, "a=fingerprint needs <hash function> <hex:hex:...>") }
        var bytes: [UInt8] = []
        for pair in f[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard pair.utf8.count == 2, let b = UInt8(pair, radix: 16) else {
                throw fail(i, "a=fingerprint: \"\(pair.prefix(8))\" is not a hex byte")
            }
            bytes.append(b)
        }
        let fp = JSEPFingerprint(algorithm: String(f[0]), bytes: bytes)
        if let n = JSEPFingerprint.digestLength(algorithm: fp.algorithm), n != bytes.count {
            throw fail(i, "a=fingerprint: a \(fp.algorithm) digest has \(n) bytes, this one \(bytes.count)")
        }
        return fp
    }

    func setup(_ value: Substring?, line i: Int, type: JSEPType) throws(JSEPError) -> JSEPSetupRole {
        guard let role = value.flatMap({ JSEPSetupRole(rawValue: String($0)) }) else {
            throw fail(i, "a=setup must be actpass, active, passive or holdconn")
        }
        if type == .answer && role == .actpass {
            throw fail(i, "an answer must pick active or passive, not actpass (RFC 8842 §5.3)")
        }
        return role
    }

    /// `a=ice-ufrag`, `a=ice-pwd` and `a=ice-options` of one level, gathered and checked.
    struct ICEAccumulator {
        var ufrag: (String, Int)?
        var pwd: (String, Int)?
        var options: [String] = []

        mutating func add(_ name: Substring, _ value: Substring?, line i: Int, _ p: JSEPParser) throws(JSEPError) {
            let v = value ?? ""
            switch name {
            case "ice-ufrag":
                if ufrag != nil { throw p.fail(i, "a=ice-ufrag appears twice") }
                guard JSEPICEParameters.isICEChars(v, 4...256) else {
                    throw p.fail(i, "a=ice-ufrag must be 4-256 characters of A-Z a-z 0-9 + / (RFC 8839 §5.4)")
                }
                ufrag = (String(v), i)
            case "ice-pwd":
                if pwd != nil { throw p.fail(i, "a=ice-pwd appears twice") }
                guard JSEPICEParameters.isICEChars(v, 22...256) else {
                    throw p.fail(i, "a=ice-pwd must be 22-256 characters of A-Z a-z 0-9 + / (RFC 8839 §5.4)")
                }
                pwd = (String(v), i)
            default:
                let tokens = v.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                guard !tokens.isEmpty else { throw p.fail(i, "a=ice-options needs at least one option") }
                options += tokens
            }
        }

        func parameters(_ p: JSEPParser) throws(JSEPError) -> JSEPICEParameters? {
            switch (ufrag, pwd) {
            case (nil, nil):
                return nil
            case ((let u, _)?, (let w, _)?):
                return JSEPICEParameters(usernameFragment: u, password: w)
            case ((_, let line)?, nil):
                throw p.fail(line, "a=ice-ufrag without a=ice-pwd")
            case (nil, (_, let line)?):
                throw p.fail(line, "a=ice-pwd without a=ice-ufrag")
            }
        }
    }
}
