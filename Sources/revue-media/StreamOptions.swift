// Options shared by `send`, `receive` and `demo`: SRTP suites and keys, SDP in and out.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum StreamOptions {
    /// `--suite` names: the CLI's lower-case spelling or the SDP name.
    static func suite(_ text: String) throws -> SRTPSuite? {
        switch text.lowercased() {
        case "aes-128-gcm", "aead_aes_128_gcm", "gcm": return .aeadAES128GCM
        case "aes-256-gcm", "aead_aes_256_gcm": return .aeadAES256GCM
        case "aes-cm-128-hmac-sha1-80", "aes_cm_128_hmac_sha1_80", "aes-cm": return .aesCM128HMACSHA1_80
        case "aes-cm-128-hmac-sha1-32", "aes_cm_128_hmac_sha1_32": return .aesCM128HMACSHA1_32
        case "none": return nil
        default:
            throw UsageError(
                description:
                    "--suite \(text): expected aes-128-gcm, aes-256-gcm, aes-cm-128-hmac-sha1-80, aes-cm-128-hmac-sha1-32 or none"
            )
        }
    }

    /// The `--key` text (base64 of key||salt, with or without `inline:`) for `suite`.
    static func key(_ text: String, suite: SRTPSuite) throws -> SRTPKeyMaterial {
        let inline = text.lowercased().hasPrefix("inline:") ? text : "inline:" + text
        do { return try SRTPKeyMaterial(suite: suite, inline: inline) } catch {
            throw UsageError(
                description: "--key: \(error) (expected base64 of \(suite.keyAndSaltLength) bytes of key and salt for \(suite))")
        }
    }

    /// The base64 key text of `material` (what `--key` takes).
    static func keyText(_ material: SRTPKeyMaterial) -> String {
        let inline = material.inlineKeyParams
        return inline.hasPrefix("inline:") ? String(inline.dropFirst(7)) : inline
    }

    /// An SDP (RFC 8866, `a=crypto` per RFC 4568) describing what `send` sends: video on the
    /// destination port, audio on port + 2.
    static func sdp(
        destination: SocketAddress, video: (codec: VPXCodec, pt: UInt8, ssrc: UInt32)?,
        audio: (pt: UInt8, ssrc: UInt32, channels: Int)?, audioPort: UInt16, key: SRTPKeyMaterial?
    ) -> SDPSessionDescription {
        let addressType = destination.family == .ipv4 ? "IP4" : "IP6"
        var s = SDPSessionDescription(
            origin: SDPOrigin(sessionID: RandomBytes.uint64() >> 2, address: destination.host),
            sessionName: "Revue", connection: SDPConnection(addressType: addressType, address: destination.host))
        s.origin.addressType = addressType
        s.attributes = [SDPAttribute("tool", "revue-media")]
        let proto = key == nil ? "RTP/AVP" : "RTP/SAVP"
        if let v = video {
            var m = SDPMediaDescription(
                type: "video", port: Int(destination.port), proto: proto, payloadType: Int(v.pt),
                encoding: v.codec == .vp8 ? "VP8" : "VP9", clockRate: 90_000)
            m.rtcpFeedback = [.nack(Int(v.pt)), .pli(Int(v.pt)), .fir(Int(v.pt))]
            m.ssrcs = [SDPSSRCAttribute(ssrc: v.ssrc, attribute: "cname", value: "revue-media")]
            m.direction = .sendonly
            if let key { m.crypto = [SDPCrypto(tag: 1, suite: key.suite.sdpName, keyAndSalt: key.keyAndSalt)] }
            s.media.append(m)
        }
        if let a = audio {
            var m = SDPMediaDescription(
                type: "audio", port: Int(audioPort), proto: proto, payloadType: Int(a.pt),
                encoding: "opus", clockRate: 48_000, channels: 2)
            m.formatParameters = [
                SDPFormatParameters(
                    payloadType: Int(a.pt),
                    parameters: "minptime=10;useinbandfec=1" + (a.channels == 2 ? ";stereo=1;sprop-stereo=1" : ""))
            ]
            m.ssrcs = [SDPSSRCAttribute(ssrc: a.ssrc, attribute: "cname", value: "revue-media")]
            m.direction = .sendonly
            if let key { m.crypto = [SDPCrypto(tag: 1, suite: key.suite.sdpName, keyAndSalt: key.keyAndSalt)] }
            s.media.append(m)
        }
        return s
    }

    /// What a receiver should expect, and the key, from an SDP file.
    static func tracks(fromSDP path: String) throws -> (ReceiveTracks, SRTPKeyMaterial?) {
        let sdp = try SDPSessionDescription.read(path: path)
        var tracks = ReceiveTracks(video: nil, audio: nil)
        var key: SRTPKeyMaterial?
        for m in sdp.media {
            guard let pt = m.payloadTypes.first, let map = m.rtpMap(for: pt) else { continue }
            if let c = m.crypto.first {
                guard let suite = SRTPSuite(sdpName: c.suite) else {
                    throw InputError(description: "\(path): a=crypto suite \(c.suite) is not supported")
                }
                guard let k = c.keys.first else { throw InputError(description: "\(path): a=crypto without a key") }
                do { key = try SRTPKeyMaterial(suite: suite, keyAndSalt: k.keyAndSalt) } catch {
                    throw InputError(description: "\(path): a=crypto: \(error)")
                }
            }
            switch (m.type, map.encoding.uppercased()) {
            case ("video", "VP8"): tracks.video = (.vp8, UInt8(pt))
            case ("video", "VP9"): tracks.video = (.vp9, UInt8(pt))
            case ("audio", "OPUS"):
                let stereo = m.formatParameters(for: pt)?.value(for: "stereo") == "1"
                tracks.audio = (UInt8(pt), stereo ? 2 : 1)
            default:
                throw InputError(description: "\(path): m=\(m.type) \(map.encoding) is not supported (VP8, VP9 and Opus are)")
            }
        }
        if tracks.video == nil && tracks.audio == nil {
            throw InputError(description: "\(path): no VP8, VP9 or Opus media section")
        }
        return (tracks, key)
    }
}
