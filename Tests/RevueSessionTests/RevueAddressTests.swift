import MediaCore
import Testing

@testable import RevueSession

@Suite struct RevueAddressTests {
    let key = (0..<32).map { UInt8($0 * 7 & 255) }

    @Test func roundTripsThroughText() throws {
        let a = RevueAddress(publicKey: key, nospam: 0xDEAD_BEEF)
        #expect(a.text.count == 76)
        #expect(a.text.hasPrefix(Hex.encode(key) + "DEADBEEF"))
        #expect(try RevueAddress.parse(a.text) == a)
        #expect(try RevueAddress.parse(" " + a.text.lowercased() + "\n") == a)
    }

    @Test func rejectsWrongLengthAndNonHex() {
        let t = RevueAddress(publicKey: key, nospam: 1).text
        #expect(throws: FriendAddError.invalidAddress) { try RevueAddress.parse(String(t.dropLast())) }
        #expect(throws: FriendAddError.invalidAddress) { try RevueAddress.parse(t + "00") }
        #expect(throws: FriendAddError.invalidAddress) { try RevueAddress.parse("G" + t.dropFirst()) }
        #expect(throws: FriendAddError.invalidAddress) { try RevueAddress.parse("") }
    }

    @Test func catchesEverySingleDigitTypo() {
        let t = Array(RevueAddress(publicKey: key, nospam: 42).text)
        var missed = 0
        for i in t.indices {
            var typo = t
            typo[i] = typo[i] == "0" ? "1" : "0"
            do { _ = try RevueAddress.parse(String(typo)); missed += 1 } catch {
                #expect(error == .badChecksum)
            }
        }
        // A 16-bit checksum misses a given typo with probability 2^-16; this fixed key misses none.
        #expect(missed == 0)
    }

    @Test func nospamChangesAddressNotKey() {
        let a = RevueAddress(publicKey: key, nospam: 1), b = RevueAddress(publicKey: key, nospam: 2)
        #expect(a.text != b.text)
        #expect(a.text.prefix(64) == b.text.prefix(64))
    }
}
