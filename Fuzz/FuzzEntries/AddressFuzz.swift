import MediaCore
import RevueSession

extension FuzzEntries {
    /// Revue address and friend ID parsing (`RevueAddress.parse`, `RevueAddress.parseFriendId`),
    /// as `FriendManager.addFriend(address:)` and `addFriendNorequest(friendId:)` run them on
    /// user input. Whatever parses must re-encode to canonical text (76 upper-case hex digits)
    /// that the input contains (in either case), that parses back to the same address, and whose
    /// checksum and nospam bytes are the ones the input carried.
    @Sendable public static func address(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        if let id = RevueAddress.parseFriendId(text) {
            fuzzRequire(id.count == 32, "friend ID of \(id.count) bytes")
            fuzzRequire(
                containsIgnoringASCIICase(text, Hex.encode(id)), "friend ID \(Hex.encode(id)) not in \(text.debugDescription)")
        }
        guard let address = try? RevueAddress.parse(text) else { return }
        let canonical = address.text
        fuzzRequire(
            canonical.utf8.count == RevueAddress.hexCount
                && canonical.utf8.allSatisfy { (48...57).contains($0) || (65...70).contains($0) },
            "address text is not 76 upper-case hex digits: \(canonical.debugDescription)")
        fuzzRequire(
            containsIgnoringASCIICase(text, canonical), "canonical \(canonical) is not the input's \(text.debugDescription)")
        let again: RevueAddress
        do { again = try RevueAddress.parse(canonical) } catch {
            fuzzRequire(false, "canonical address \(canonical) does not parse: \(error)"); return
        }
        fuzzRequire(
            again == address && again.text == canonical, "address changed through its text: \(canonical) -> \(again.text)")
        let bytes = Hex.decode(canonical) ?? []
        fuzzRequire(
            bytes.count == RevueAddress.byteCount && Array(bytes[0..<32]) == address.publicKey
                && Array(bytes[32..<36]) == RevueAddress.nospamBytes(address.nospam)
                && Array(bytes[36..<38]) == RevueAddress.checksum(publicKey: address.publicKey, nospam: address.nospam),
            "address bytes do not carry key, nospam and checksum: \(canonical)")
    }

    /// Whether `needle` occurs in `haystack` as UTF-8 bytes, ignoring ASCII case (byte-wise, so
    /// combining marks next to the digits cannot hide or fake a match).
    static func containsIgnoringASCIICase(_ haystack: String, _ needle: String) -> Bool {
        func lower(_ s: String) -> [UInt8] { s.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 } }
        let h = lower(haystack), n = lower(needle)
        guard n.count <= h.count else { return false }
        return (0...(h.count - n.count)).contains { i in h[i..<(i + n.count)].elementsEqual(n) }
    }
}
