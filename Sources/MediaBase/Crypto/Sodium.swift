// The libsodium primitives the engine and the session layer are built from: X25519,
// ChaCha20-Poly1305 (IETF), BLAKE2b, Argon2id, secretbox, and the HMAC/HKDF constructions of the
// Noise specification (rev 34, section 4.3). Random bytes come from `RandomBytes`.
internal import CMediaShims

/// Thin, allocation-tolerant wrappers over libsodium. Control-plane only (handshakes, friend
/// messages); every function is thread-safe because libsodium's are once `sodium_init` ran.
package enum Sodium {
    /// Whether libsodium initialised (its one `sodium_init`, shared with `RandomBytes`).
    package static var ready: Bool { sodiumInitStatus >= 0 }

    /// `count` random bytes straight into zeroing storage (cookie secrets, SRTP keys).
    package static func randomSecret(_ count: Int) -> SecretKeyBytes {
        SecretKeyBytes(count: count) { RandomBytes.fill($0) }
    }

    /// X25519 public key of a 32-byte secret (`crypto_scalarmult_base`).
    package static func x25519Public(secret: SecretKeyBytes) -> [UInt8] {
        precondition(ready && secret.count == 32)
        var out = [UInt8](repeating: 0, count: 32)
        _ = out.withUnsafeMutableBufferPointer { o in
            secret.withUnsafeBytes { crypto_scalarmult_base(o.baseAddress!, $0.bindMemory(to: UInt8.self).baseAddress!) }
        }
        return out
    }

    /// Zeroes an array's bytes in place (`sodium_memzero`). Only this array's buffer: copies that
    /// share it are copied first by Swift and keep their bytes.
    package static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { sodium_memzero(b, $0.count) } }
    }

    /// Zeroes memory in place (`sodium_memzero`, which the compiler does not remove): key material
    /// in a buffer about to be freed. Thread rule: the caller owns the buffer. Cost: one pass.
    package static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
    }

    /// X25519 shared secret (`crypto_scalarmult`); nil when the peer's point has small order
    /// (libsodium returns -1 for an all-zero result), which the caller treats as a forged packet.
    package static func x25519(secret: SecretKeyBytes, peerPublic: [UInt8]) -> [UInt8]? {
        precondition(ready && secret.count == 32)
        guard peerPublic.count == 32 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        let rc = out.withUnsafeMutableBufferPointer { o in
            secret.withUnsafeBytes { s in
                peerPublic.withUnsafeBufferPointer {
                    crypto_scalarmult(o.baseAddress!, s.bindMemory(to: UInt8.self).baseAddress!, $0.baseAddress!)
                }
            }
        }
        return rc == 0 ? out : nil
    }

    /// Unkeyed BLAKE2b with a 64-byte output (`crypto_generichash_blake2b`). Several parts are
    /// hashed from one concatenated copy, wiped afterwards (the parts are often key material).
    package static func blake2b(_ parts: [UInt8]..., outputLength: Int = 64) -> [UInt8] {
        if parts.count == 1 { return blake2b(whole: parts[0], outputLength: outputLength) }
        var joined = parts.flatMap { $0 }
        defer { wipe(&joined) }
        return blake2b(whole: joined, outputLength: outputLength)
    }

    /// BLAKE2b of one array.
    private static func blake2b(whole input: [UInt8], outputLength: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = out.withUnsafeMutableBufferPointer { o in
            input.withUnsafeBufferPointer {
                crypto_generichash_blake2b(o.baseAddress!, outputLength, $0.baseAddress, UInt64($0.count), nil, 0)
            }
        }
        return out
    }

    /// Unkeyed BLAKE2b of a secret's bytes, read in place (no copy to wipe): key fingerprints
    /// for logs (`SRTPKeyMaterial.fingerprint`). Thread rule: any thread. Cost: one hash.
    package static func blake2b(_ secret: SecretKeyBytes, outputLength: Int = 16) -> [UInt8] {
        RandomBytes.ensureInitialized()
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = out.withUnsafeMutableBufferPointer { o in
            secret.withUnsafeBytes {
                crypto_generichash_blake2b(
                    o.baseAddress!, outputLength, $0.bindMemory(to: UInt8.self).baseAddress, UInt64($0.count), nil, 0)
            }
        }
        return out
    }

    /// Keyed BLAKE2b (`crypto_generichash_blake2b` with a key): a MAC of `outputLength` bytes.
    package static func keyedBlake2b(key: [UInt8], _ data: [UInt8], outputLength: Int = 16) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = out.withUnsafeMutableBufferPointer { o in
            data.withUnsafeBufferPointer { d in
                key.withUnsafeBufferPointer { k in
                    crypto_generichash_blake2b(
                        o.baseAddress!, outputLength, d.baseAddress, UInt64(d.count), k.baseAddress, k.count)
                }
            }
        }
        return out
    }

    /// Keyed BLAKE2b with a key held in `SecretKeyBytes` (pair keys, cookie secrets).
    package static func keyedBlake2b(key: SecretKeyBytes, _ data: [UInt8], outputLength: Int = 16) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = out.withUnsafeMutableBufferPointer { o in
            data.withUnsafeBufferPointer { d in
                key.withUnsafeBytes { k in
                    crypto_generichash_blake2b(
                        o.baseAddress!, outputLength, d.baseAddress, UInt64(d.count),
                        k.bindMemory(to: UInt8.self).baseAddress, k.count)
                }
            }
        }
        return out
    }

    /// Keyed BLAKE2b over bytes in place (no copy): the read-queue screen's mac1 check.
    package static func keyedBlake2b(key: [UInt8], _ data: UnsafeRawBufferPointer, outputLength: Int = 16) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        _ = out.withUnsafeMutableBufferPointer { o in
            key.withUnsafeBufferPointer { k in
                crypto_generichash_blake2b(
                    o.baseAddress!, outputLength, data.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    UInt64(data.count), k.baseAddress, k.count)
            }
        }
        return out
    }

    /// HMAC-BLAKE2b as RFC 2104 defines it with BLAKE2b's 128-byte block (Noise section 4.3, not
    /// BLAKE2b's own keyed mode).
    package static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var k = key.count > 128 ? blake2b(key) : key
        k += [UInt8](repeating: 0, count: 128 - k.count)
        let inner = blake2b(k.map { $0 ^ 0x36 }, data)
        return blake2b(k.map { $0 ^ 0x5c }, inner)
    }

    /// Noise HKDF (section 4.3): two or three 64-byte outputs chained from `chainingKey`.
    package static func hkdf(chainingKey: [UInt8], input: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = hmac(key: chainingKey, input)
        let o1 = hmac(key: temp, [1])
        let o2 = hmac(key: temp, o1 + [2])
        if outputs == 2 { return [o1, o2] }
        return [o1, o2, hmac(key: temp, o2 + [3])]
    }

    /// ChaCha20-Poly1305 IETF nonce from a Noise counter: 4 zero bytes then the counter, little
    /// endian (Noise section 12.3).
    package static func nonce(_ n: UInt64) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { out[4 + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt64(i))) }
        return out
    }

    /// AEAD encrypt (`crypto_aead_chacha20poly1305_ietf_encrypt`): ciphertext plus 16-byte tag.
    package static func seal(key: [UInt8], nonce n: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        precondition(key.count == 32)
        return key.withUnsafeBufferPointer { seal(keyPointer: $0.baseAddress!, nonce: n, ad: ad, plaintext: plaintext) }
    }

    /// AEAD decrypt (`crypto_aead_chacha20poly1305_ietf_decrypt`); nil when the tag does not verify.
    package static func open(key: [UInt8], nonce n: UInt64, ad: [UInt8], ciphertext: some Collection<UInt8>) -> [UInt8]? {
        precondition(key.count == 32)
        return key.withUnsafeBufferPointer { open(keyPointer: $0.baseAddress!, nonce: n, ad: ad, ciphertext: ciphertext) }
    }

    /// The AEAD encryption both `seal`s share, with the 32-byte key behind `keyPointer`.
    private static func seal(keyPointer: UnsafePointer<UInt8>, nonce n: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var outLen: UInt64 = 0
        let nonce = nonce(n)
        _ = out.withUnsafeMutableBufferPointer { o in
            plaintext.withUnsafeBufferPointer { p in
                ad.withUnsafeBufferPointer { a in
                    nonce.withUnsafeBufferPointer { nb in
                        crypto_aead_chacha20poly1305_ietf_encrypt(
                            o.baseAddress!, &outLen, p.baseAddress, UInt64(p.count),
                            a.baseAddress, UInt64(a.count), nil, nb.baseAddress!, keyPointer)
                    }
                }
            }
        }
        return out
    }

    /// The AEAD decryption both `open`s share, with the 32-byte key behind `keyPointer`.
    private static func open(keyPointer: UnsafePointer<UInt8>, nonce n: UInt64, ad: [UInt8], ciphertext: some Collection<UInt8>)
        -> [UInt8]?
    {
        let c = Array(ciphertext)
        guard c.count >= 16 else { return nil }
        var out = [UInt8](repeating: 0, count: c.count - 16)
        var outLen: UInt64 = 0
        let nonce = nonce(n)
        let rc = out.withUnsafeMutableBufferPointer { o in
            c.withUnsafeBufferPointer { cb in
                ad.withUnsafeBufferPointer { a in
                    nonce.withUnsafeBufferPointer { nb in
                        crypto_aead_chacha20poly1305_ietf_decrypt(
                            o.baseAddress, &outLen, nil, cb.baseAddress!, UInt64(cb.count),
                            a.baseAddress, UInt64(a.count), nb.baseAddress!, keyPointer)
                    }
                }
            }
        }
        return rc == 0 ? out : nil
    }

    /// A 32-byte key from a passphrase (`crypto_pwhash`, Argon2id, libsodium's "moderate" limits:
    /// about 256 MiB and a second or so). Nil when the system refuses the memory.
    package static func passphraseKey(_ passphrase: String, salt: [UInt8], opsLimit: UInt64, memLimit: Int) -> [UInt8]? {
        precondition(ready && salt.count == Int(crypto_pwhash_saltbytes()))
        var out = [UInt8](repeating: 0, count: 32)
        let length = UInt64(passphrase.utf8.count)
        let rc = out.withUnsafeMutableBufferPointer { o in
            salt.withUnsafeBufferPointer { sb in
                passphrase.withCString { pc in
                    crypto_pwhash(
                        o.baseAddress!, 32, pc, length, sb.baseAddress!, opsLimit, memLimit, crypto_pwhash_alg_argon2id13())
                }
            }
        }
        return rc == 0 ? out : nil
    }

    /// libsodium's "moderate" Argon2id limits (operations, bytes).
    package static var passphraseLimits: (ops: UInt64, mem: Int) {
        (UInt64(crypto_pwhash_opslimit_moderate()), Int(crypto_pwhash_memlimit_moderate()))
    }

    /// Salt length of `passphraseKey`.
    package static var passphraseSaltLength: Int { Int(crypto_pwhash_saltbytes()) }

    /// `crypto_secretbox_easy` (XSalsa20-Poly1305) with a fresh random 24-byte nonce: nonce + box.
    package static func secretbox(key: [UInt8], _ plaintext: [UInt8]) -> [UInt8] {
        precondition(ready && key.count == 32)
        let nonce = RandomBytes.bytes(24)
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        _ = out.withUnsafeMutableBufferPointer { o in
            plaintext.withUnsafeBufferPointer { p in
                nonce.withUnsafeBufferPointer { n in
                    key.withUnsafeBufferPointer {
                        crypto_secretbox_easy(o.baseAddress!, p.baseAddress, UInt64(p.count), n.baseAddress!, $0.baseAddress!)
                    }
                }
            }
        }
        return nonce + out
    }

    /// Opens what `secretbox` made; nil when the key is wrong or the box was altered.
    package static func secretboxOpen(key: [UInt8], _ sealed: [UInt8]) -> [UInt8]? {
        precondition(ready && key.count == 32)
        guard sealed.count >= 24 + 16 else { return nil }
        let nonce = Array(sealed[0..<24]), box = Array(sealed[24...])
        var out = [UInt8](repeating: 0, count: box.count - 16)
        let rc = out.withUnsafeMutableBufferPointer { o in
            box.withUnsafeBufferPointer { b in
                nonce.withUnsafeBufferPointer { n in
                    key.withUnsafeBufferPointer {
                        crypto_secretbox_open_easy(
                            o.baseAddress, b.baseAddress!, UInt64(b.count), n.baseAddress!, $0.baseAddress!)
                    }
                }
            }
        }
        return rc == 0 ? out : nil
    }

    /// `seal` with a key held in `SecretKeyBytes` (transport keys).
    package static func seal(key: SecretKeyBytes, nonce n: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        precondition(key.count == 32)
        return key.withUnsafeBytes {
            seal(keyPointer: $0.bindMemory(to: UInt8.self).baseAddress!, nonce: n, ad: ad, plaintext: plaintext)
        }
    }

    /// `open` with a key held in `SecretKeyBytes` (transport keys).
    package static func open(key: SecretKeyBytes, nonce n: UInt64, ad: [UInt8], ciphertext: some Collection<UInt8>) -> [UInt8]? {
        precondition(key.count == 32)
        return key.withUnsafeBytes {
            open(keyPointer: $0.bindMemory(to: UInt8.self).baseAddress!, nonce: n, ad: ad, ciphertext: ciphertext)
        }
    }

    /// Constant-time comparison (`sodium_memcmp`).
    package static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { sodium_memcmp(x.baseAddress!, $0.baseAddress!, a.count) == 0 } }
    }
}

/// Hex helpers for keys and addresses (upper case out, either case in).
package enum Hex {
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    package static func decode(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count % 2 == 0 else { return nil }
        func v(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 65...70: return c - 55
            case 97...102: return c - 87
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let h = v(u[i]), let l = v(u[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }
}
