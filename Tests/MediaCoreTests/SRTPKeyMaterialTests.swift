import Foundation
import MediaCore
import Testing

/// The `SRTPKeyMaterialError` thrown by `body`, or nil.
private func keyError(_ body: () throws -> Void) -> SRTPKeyMaterialError? {
    do { try body() } catch let error as SRTPKeyMaterialError { return error } catch { return nil }
    return nil
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

@Suite struct SRTPKeyMaterialTests {
    // RFC 4568 section 5.1 offer example (also quoted by libwebrtc, sipsorcery, belle-sip tests).
    static let rfc4568Offer = "inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz|2^20|1:4"
    // RFC 4568 section 4 example.
    static let rfc4568Section4 = "inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR|2^20|1:32"

    @Test func parsesTheRFC4568OfferExample() throws {
        let key = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: Self.rfc4568Offer)
        // The example's 30 bytes are ASCII text: "YS___semctl () {\t220;}\n}\nunles".
        #expect(key.keyAndSalt == Array("YS___semctl () {\t220;}\n}\nunles".utf8))
        #expect(key.masterKey == Array("YS___semctl () {".utf8))
        #expect(key.masterSalt == Array("\t220;}\n}\nunles".utf8))
        #expect(key.lifetime == 1 << 20)
        #expect(key.mki == SRTPKeyMaterial.MKI(value: 1, length: 4))
        #expect(key.inlineKeyParams == Self.rfc4568Offer)
    }

    @Test func parsesTheRFC4568Section4Example() throws {
        let key = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_32, inline: Self.rfc4568Section4)
        #expect(hex(key.keyAndSalt) == "3d2d6e40255e7821426a75667239293f2c2335685c603d265d7b71695051")
        #expect(key.lifetime == 1 << 20)
        #expect(key.mki == SRTPKeyMaterial.MKI(value: 1, length: 32))
        #expect(key.inlineKeyParams == Self.rfc4568Section4)
    }

    @Test func rejectsTheMisquotedRFCExampleWithAClearMessage() {
        // A longer variant of the RFC key seen in some write-ups: 45 base64 characters, which no
        // byte string encodes to.
        let error = keyError {
            _ = try SRTPKeyMaterial(
                suite: .aesCM128HMACSHA1_80,
                inline: "inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVzcyAoZ")
        }
        #expect(error?.code == .badBase64)
        #expect(error?.message.contains("45 base64 characters") == true)
    }

    @Test(arguments: SRTPSuite.allCases)
    func inlineFormRoundTrips(suite: SRTPSuite) throws {
        for _ in 0..<20 {
            let key = SRTPKeyMaterial.random(for: suite)
            let text = key.inlineKeyParams
            #expect(text.hasPrefix("inline:"))
            // Checked against Foundation's independent base64 encoder.
            let expected = Data(key.keyAndSalt).base64EncodedString()
            #expect(text == "inline:" + expected)
            #expect(try SRTPKeyMaterial(suite: suite, inline: text) == key)
        }
    }

    @Test func keyMethodIsCaseInsensitiveLikeAllABNFLiterals() throws {
        let upper = try SRTPKeyMaterial(
            suite: .aesCM128HMACSHA1_80,
            inline: "INLINE:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz")
        #expect(upper.keyAndSalt == Array("YS___semctl () {\t220;}\n}\nunles".utf8))
        #expect(upper.inlineKeyParams.hasPrefix("inline:"))
    }

    @Test func lifetimeAndMKIRoundTrip() throws {
        var key = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        key.lifetime = 1 << 31
        key.mki = .init(value: 258, length: 2)
        #expect(key.inlineKeyParams.hasSuffix("|2^31|258:2"))
        #expect(try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: key.inlineKeyParams) == key)
        key.lifetime = 1000
        #expect(key.inlineKeyParams.hasSuffix("|1000|258:2"))
        #expect(try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: key.inlineKeyParams) == key)
        // MKI alone, without a lifetime (RFC 4568 grammar allows either to be absent).
        let base = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80).inlineKeyParams
        let mkiOnly = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: base + "|7:1")
        #expect(mkiOnly.lifetime == nil)
        #expect(mkiOnly.mki == SRTPKeyMaterial.MKI(value: 7, length: 1))
    }

    @Test func base64MatchesFoundationForEveryLength() throws {
        // Key-salt lengths of every suite and every padding case.
        for length in [28, 29, 30, 31, 44, 45, 46] {
            let bytes = RandomBytes.bytes(length)
            let encoded = Data(bytes).base64EncodedString()
            let decoded = try SRTPInlineBase64.decode(Substring(encoded))
            #expect(decoded == bytes, "length \(length)")
            let unpadded = encoded.replacingOccurrences(of: "=", with: "")
            #expect(try SRTPInlineBase64.decode(Substring(unpadded)) == bytes, "unpadded length \(length)")
        }
    }

    @Test func gcmKeySaltParsesWithAndWithoutPadding() throws {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let text = key.inlineKeyParams
        #expect(text.hasSuffix("=="), "28 bytes end in a 1-byte group: two padding characters")
        #expect(try SRTPKeyMaterial(suite: .aeadAES128GCM, inline: String(text.dropLast(2))) == key)
        let halfPadded = keyError { _ = try SRTPKeyMaterial(suite: .aeadAES128GCM, inline: String(text.dropLast())) }
        #expect(halfPadded?.code == .badBase64)
    }

    @Test func badBase64ThrowsNamingTheProblem() {
        let cases: [(String, String)] = [
            ("inline:WVNfX19zZW1jdGwgKCkg*wkyMjA7fQp9CnVubGVz", "'*' at position 20"),
            ("inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGV=z", "'=' at position 39"),
            ("inline:", "empty"),
            ("inline:|2^20", "empty"),
            ("inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVzAA===", "padding"),
            ("inline:WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVub GVz", "byte 0x20"),
        ]
        for (text, fragment) in cases {
            let error = keyError { _ = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: text) }
            #expect(error?.code == .badBase64, "\(text)")
            #expect(error?.message.contains(fragment) == true, "\(text): \(error?.message ?? "no error")")
        }
    }

    @Test func wrongLengthThrowsNamingTheSuiteAndLengths() {
        // 30 bytes of AES-CM key-salt offered for AEAD_AES_128_GCM (28 expected).
        let error = keyError { _ = try SRTPKeyMaterial(suite: .aeadAES128GCM, inline: Self.rfc4568Offer) }
        #expect(error?.code == .wrongLength)
        #expect(error?.message.contains("AEAD_AES_128_GCM") == true)
        #expect(error?.message.contains("28") == true && error?.message.contains("got 30") == true)

        let keyError1 = keyError {
            _ = try SRTPKeyMaterial(
                suite: .aeadAES256GCM, masterKey: [UInt8](repeating: 1, count: 16),
                masterSalt: [UInt8](repeating: 2, count: 12))
        }
        #expect(keyError1?.code == .wrongLength)
        #expect(keyError1?.message == "AEAD_AES_256_GCM master key must be 32 bytes, got 16")

        let saltError = keyError {
            _ = try SRTPKeyMaterial(
                suite: .aesCM128HMACSHA1_80, masterKey: [UInt8](repeating: 1, count: 16),
                masterSalt: [UInt8](repeating: 2, count: 12))
        }
        #expect(saltError?.message == "AES_CM_128_HMAC_SHA1_80 master salt must be 14 bytes, got 12")
    }

    @Test func otherKeyMethodsAndExtraFieldsAreRejected() {
        let base = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz"
        let cases: [(String, SRTPKeyMaterialError.Code)] = [
            (base, .badKeyMethod),
            ("uri:" + base, .badKeyMethod),
            ("inlin:" + base, .badKeyMethod),
            ("inline:\(base)|2^20|1:4|extra", .badKeyMethod),
            ("inline:\(base)|2^20|1:4;inline:\(base)|2^20|2:4", .badKeyMethod),
            ("inline:\(base)|2^49", .badLifetime),
            ("inline:\(base)|0", .badLifetime),
            ("inline:\(base)|2^", .badLifetime),
            ("inline:\(base)|abc", .badLifetime),
            ("inline:\(base)|", .badLifetime),
            ("inline:\(base)|1:4|2^20", .badLifetime),
            ("inline:\(base)|2^20|2^20", .badLifetime),
            ("inline:\(base)|1:0", .badMKI),
            ("inline:\(base)|1:129", .badMKI),
            ("inline:\(base)|256:1", .badMKI),
            ("inline:\(base)|x:4", .badMKI),
            ("inline:\(base)|1:", .badMKI),
            ("inline:\(base)|99999999999999999999:16", .badMKI),
            ("inline:\(base)|1:4|2:4", .badMKI),
        ]
        for (text, code) in cases {
            let error = keyError { _ = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: text) }
            #expect(error?.code == code, "\(text): \(error?.message ?? "no error")")
            #expect(error?.message.isEmpty == false)
        }
    }

    @Test(arguments: SRTPSuite.allCases)
    func randomKeysHaveTheSuiteLengthsAndDiffer(suite: SRTPSuite) {
        let a = SRTPKeyMaterial.random(for: suite)
        let b = SRTPKeyMaterial.random(for: suite)
        #expect(a.masterKey.count == suite.masterKeyLength)
        #expect(a.masterSalt.count == suite.masterSaltLength)
        #expect(a.keyAndSalt == a.masterKey + a.masterSalt)
        #expect(a != b)
        #expect(a.masterKey != b.masterKey)
    }

    @Test func equalityComparesSuiteBytesAndParameters() throws {
        let a = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        let copy = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, masterKey: a.masterKey, masterSalt: a.masterSalt)
        #expect(a == copy)
        let otherSuite = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_32, keyAndSalt: a.keyAndSalt)
        #expect(a != otherSuite)
        var flipped = a.keyAndSalt
        flipped[29] ^= 1
        #expect(try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, keyAndSalt: flipped) != a)
        var withLifetime = copy
        withLifetime.lifetime = 1 << 20
        #expect(withLifetime != a)
    }

    @Test func descriptionsNeverRevealTheKey() throws {
        let key = try SRTPKeyMaterial(suite: .aesCM128HMACSHA1_80, inline: Self.rfc4568Offer)
        var dumped = ""
        dump(key, to: &dumped)
        let texts = [
            key.description, key.debugDescription, "\(key)", String(reflecting: key), dumped,
            "\([key])", "\(Optional(key) as Any)",
        ]
        let secrets = [
            "WVNfX19zZW1jdGwgKCkg", "semctl", hex(key.keyAndSalt).prefix(16).description,
            "89, 83, 95",
        ]
        for text in texts {
            #expect(text.contains("AES_CM_128_HMAC_SHA1_80") || text.contains("aesCM128HMACSHA1_80"), "\(text)")
            for secret in secrets {
                #expect(!text.contains(secret), "\(text) reveals \(secret)")
            }
        }
        #expect(key.description.contains(key.fingerprint))
        #expect(key.fingerprint.count == 8)
        #expect(SRTPKeyMaterial.random().fingerprint != SRTPKeyMaterial.random().fingerprint)
    }

    @Test func randomKeyMaterialDrivesAWorkingContextPair() throws {
        let text = SRTPKeyMaterial.random(for: .aeadAES256GCM).inlineKeyParams
        // Both peers build their key from the signalled text.
        let senderKey = try SRTPKeyMaterial(suite: .aeadAES256GCM, inline: text)
        let receiverKey = try SRTPKeyMaterial(suite: .aeadAES256GCM, inline: text)
        let sender = try SRTPContext(material: senderKey, direction: .outbound)
        let receiver = try SRTPContext(material: receiverKey, direction: .inbound)
        var packet: [UInt8] = [0x80, 111, 0, 1, 0, 0, 0, 160, 1, 2, 3, 4] + RandomBytes.bytes(100)
        let plain = packet
        packet += [UInt8](repeating: 0, count: 16)
        let protectedLength = try packet.withUnsafeMutableBytes {
            var span = $0.mutableBytes
            return try sender.protect(&span, length: plain.count)
        }
        #expect(protectedLength == plain.count + 16)
        let length = try packet.withUnsafeMutableBytes {
            var span = $0.mutableBytes
            return try receiver.unprotect(&span, length: protectedLength)
        }
        #expect(Array(packet[..<length]) == plain)
    }
}
