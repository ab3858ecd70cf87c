// Noise_IK_25519_ChaChaPoly_BLAKE2b (The Noise Protocol Framework, revision 34):
// section 5 (CipherState, SymmetricState, HandshakeState), section 7.5 (pattern IK):
//   <- s
//   ...
//   -> e, es, s, ss
//   <- e, ee, se
package import MediaCore

/// An X25519 key pair. The secret lives in a `SecretKeyBytes`, zeroed when the last reference to
/// it goes. Immutable; any thread.
package final class KeyPair: Sendable {
    package let secret: SecretKeyBytes
    package let publicKey: [UInt8]

    /// A fresh key pair from the system CSPRNG (the random bytes are zeroed after the copy).
    convenience init() {
        var bytes = RandomBytes.bytes(32)
        self.init(secret: SecretKeyBytes(wiping: &bytes))
    }

    /// The key pair of a given 32-byte secret (clamping happens inside X25519). The caller's array
    /// is copied, not zeroed.
    package convenience init(secret: [UInt8]) {
        precondition(secret.count == 32, "an X25519 secret is 32 bytes")
        self.init(secret: SecretKeyBytes(secret))
    }

    /// The key pair of a secret already held in `SecretKeyBytes`.
    package init(secret: SecretKeyBytes) {
        precondition(secret.count == 32, "an X25519 secret is 32 bytes")
        self.secret = secret
        self.publicKey = Sodium.x25519Public(secret: secret)
    }
}

/// Noise CipherState (section 5.1) with the ChaChaPoly cipher functions (section 12.3).
struct NoiseCipherState {
    var key: [UInt8]? = nil
    var nonce: UInt64 = 0

    mutating func encrypt(ad: [UInt8], _ plaintext: [UInt8]) -> [UInt8] {
        guard let key else { return plaintext }
        defer { nonce += 1 }
        return Sodium.seal(key: key, nonce: nonce, ad: ad, plaintext: plaintext)
    }

    mutating func decrypt(ad: [UInt8], _ ciphertext: [UInt8]) -> [UInt8]? {
        guard let key else { return ciphertext }
        guard let p = Sodium.open(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext) else { return nil }
        nonce += 1
        return p
    }
}

/// Noise SymmetricState (section 5.2) with BLAKE2b (HASHLEN 64, keys truncated to 32 bytes).
struct NoiseSymmetricState {
    var ck: [UInt8]
    var h: [UInt8]
    var cipher = NoiseCipherState()

    init(protocolName: String) {
        let name = Array(protocolName.utf8)
        h = name.count <= 64 ? name + [UInt8](repeating: 0, count: 64 - name.count) : Sodium.blake2b(name)
        ck = h
    }

    mutating func mixHash(_ data: [UInt8]) { h = Sodium.blake2b(h, data) }

    /// MixKey; the old chaining and cipher keys and the input (a DH result) are zeroed.
    mutating func mixKey(_ ikm: inout [UInt8]) {
        var out = Sodium.hkdf(chainingKey: ck, input: ikm, outputs: 2)
        Sodium.wipe(&ikm)
        Sodium.wipe(&ck)
        if var old = cipher.key { cipher.key = nil; Sodium.wipe(&old) }
        ck = out[0]
        cipher = NoiseCipherState(key: Array(out[1].prefix(32)), nonce: 0)
        Sodium.wipe(&out[1])
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        let c = cipher.encrypt(ad: h, plaintext)
        mixHash(c)
        return c
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) -> [UInt8]? {
        guard let p = cipher.decrypt(ad: h, ciphertext) else { return nil }
        mixHash(ciphertext)
        return p
    }

    /// Split (section 5.2): the two transport keys, initiator-to-responder first.
    func split() -> (initiatorToResponder: [UInt8], responderToInitiator: [UInt8]) {
        var out = Sodium.hkdf(chainingKey: ck, input: [], outputs: 2)
        defer { Sodium.wipe(&out[0]); Sodium.wipe(&out[1]) }
        return (Array(out[0].prefix(32)), Array(out[1].prefix(32)))
    }
}

/// One IK handshake, either side. Not thread-safe; a handshake lives for two messages.
package struct NoiseIKHandshake {
    static let protocolName = "Noise_IK_25519_ChaChaPoly_BLAKE2b"
    /// Bytes of message 1 without payload: e (32) + encrypted s (32 + 16) + payload tag (16).
    package static let message1Overhead = 32 + 48 + 16
    /// Bytes of message 2 without payload: e (32) + payload tag (16).
    package static let message2Overhead = 32 + 16

    let isInitiator: Bool
    private(set) var symmetric: NoiseSymmetricState
    private let s: KeyPair
    private var e: KeyPair?
    package private(set) var remoteStatic: [UInt8]?
    private var remoteEphemeral: [UInt8]?

    /// Starts a handshake (section 5.3 Initialize). The initiator must know `remoteStatic`; the
    /// ephemeral key is random unless a test vector supplies it.
    package init(initiator: Bool, prologue: [UInt8], localStatic: KeyPair, remoteStatic: [UInt8]?, ephemeral: KeyPair? = nil) {
        precondition(!initiator || remoteStatic?.count == 32, "the IK initiator knows the responder's key")
        isInitiator = initiator
        symmetric = NoiseSymmetricState(protocolName: Self.protocolName)
        s = localStatic
        e = ephemeral
        self.remoteStatic = remoteStatic
        symmetric.mixHash(prologue)
        // Pre-message "<- s": the responder's static key.
        symmetric.mixHash(initiator ? remoteStatic! : localStatic.publicKey)
    }

    /// The handshake hash (section 5.2 GetHandshakeHash), for channel binding and tests.
    var handshakeHash: [UInt8] { symmetric.h }

    /// Initiator: "-> e, es, s, ss" plus payload.
    package mutating func writeMessage1(payload: [UInt8]) -> [UInt8]? {
        precondition(isInitiator)
        let e = self.e ?? KeyPair()
        self.e = e
        var out = e.publicKey
        symmetric.mixHash(e.publicKey)
        guard var es = Sodium.x25519(secret: e.secret, peerPublic: remoteStatic!) else { return nil }
        symmetric.mixKey(&es)
        out += symmetric.encryptAndHash(s.publicKey)
        guard var ss = Sodium.x25519(secret: s.secret, peerPublic: remoteStatic!) else { return nil }
        symmetric.mixKey(&ss)
        out += symmetric.encryptAndHash(payload)
        return out
    }

    /// Responder: reads message 1; returns its payload, or nil when it does not authenticate.
    /// `remoteStatic` then holds the initiator's identity.
    package mutating func readMessage1(_ message: [UInt8]) -> [UInt8]? {
        precondition(!isInitiator)
        guard message.count >= Self.message1Overhead else { return nil }
        let re = Array(message[0..<32])
        remoteEphemeral = re
        symmetric.mixHash(re)
        guard var es = Sodium.x25519(secret: s.secret, peerPublic: re) else { return nil }
        symmetric.mixKey(&es)
        guard let rs = symmetric.decryptAndHash(Array(message[32..<80])) else { return nil }
        remoteStatic = rs
        guard var ss = Sodium.x25519(secret: s.secret, peerPublic: rs) else { return nil }
        symmetric.mixKey(&ss)
        return symmetric.decryptAndHash(Array(message[80...]))
    }

    /// Responder: "<- e, ee, se" plus payload.
    package mutating func writeMessage2(payload: [UInt8]) -> [UInt8]? {
        precondition(!isInitiator)
        let e = self.e ?? KeyPair()
        self.e = e
        var out = e.publicKey
        symmetric.mixHash(e.publicKey)
        guard var ee = Sodium.x25519(secret: e.secret, peerPublic: remoteEphemeral!),
            var se = Sodium.x25519(secret: e.secret, peerPublic: remoteStatic!)
        else { return nil }
        symmetric.mixKey(&ee)
        symmetric.mixKey(&se)
        out += symmetric.encryptAndHash(payload)
        return out
    }

    /// Initiator: reads message 2; returns its payload, or nil when it does not authenticate.
    package mutating func readMessage2(_ message: [UInt8]) -> [UInt8]? {
        precondition(isInitiator)
        guard message.count >= Self.message2Overhead, let e else { return nil }
        let re = Array(message[0..<32])
        remoteEphemeral = re
        symmetric.mixHash(re)
        guard var ee = Sodium.x25519(secret: e.secret, peerPublic: re),
            var se = Sodium.x25519(secret: s.secret, peerPublic: re)
        else { return nil }
        symmetric.mixKey(&ee)
        symmetric.mixKey(&se)
        return symmetric.decryptAndHash(Array(message[32...]))
    }

    /// The transport keys after message 2: (send, receive) from this side's point of view, as
    /// plain arrays (test vectors and the fuzzer).
    package func transportKeys() -> (send: [UInt8], receive: [UInt8]) {
        let (i2r, r2i) = symmetric.split()
        return isInitiator ? (i2r, r2i) : (r2i, i2r)
    }

    /// The transport keys held in `SecretKeyBytes`, the intermediate arrays zeroed.
    func transportSecrets() -> (send: SecretKeyBytes, receive: SecretKeyBytes) {
        var (i2r, r2i) = symmetric.split()
        let a = SecretKeyBytes(wiping: &i2r), b = SecretKeyBytes(wiping: &r2i)
        return isInitiator ? (a, b) : (b, a)
    }
}
