internal import MediaCore
// First screen of handshake initiations, on the session socket's read queue: mac1, the load
// bucket, and cookie replies under load happen there, so a spoofed flood never reaches (or
// queues for) the main actor; only initiations worth four X25519 hop over. WireGuard does the
// same before its handshake queue.
import Synchronization

/// Screens datagrams on the read queue (`screen`), holds the cookie secrets for both that queue and
/// the main actor (`rotate` from the main actor every two minutes). Thread rule: `screen` only on
/// the read queue; the rest from any thread. Cost per initiation: one BLAKE2b, under load up to
/// two more and a 46-byte reply.
/// Sendable: keys are `let`s, the secrets a Mutex, the counters atomics; `socket` is set once before reading
/// starts; `tokens` and `tokensAt` are used only by `screen`, on the read queue.
final class HandshakeGate: @unchecked Sendable {
    private let mac1Key: [UInt8]
    private let cookieKey: [UInt8]
    private let secrets = Mutex<(current: SecretKeyBytes, previous: SecretKeyBytes)>(
        (Sodium.randomSecret(32), Sodium.randomSecret(32)))
    /// Initiations answered with a cookie here (counted as rate limited too), and dropped for a bad
    /// mac1; the session core folds them into its counters.
    let cookieReplies = Atomic<Int>(0)
    let badMac1 = Atomic<Int>(0)
    /// Where cookie replies go out (set once the socket exists).
    var socket: (any DatagramPort)?
    // Read queue only: the load bucket, on the session's clock.
    private var tokens: Double
    private var tokensAt: MonotonicTime
    private let rate: Double, burst: Double
    private let scheduler: any TaskScheduler

    init(publicKey: [UInt8], rate: Double, burst: Double, scheduler: any TaskScheduler = DispatchTaskScheduler.main) {
        self.scheduler = scheduler
        tokensAt = scheduler.now
        mac1Key = HandshakeMACs.mac1Key(publicKey)
        cookieKey = HandshakeMACs.cookieKey(publicKey)
        self.rate = rate
        self.burst = burst
        tokens = burst
    }

    /// The cookie of an endpoint (and relayed source key) now.
    func cookie(for input: [UInt8]) -> [UInt8] {
        Sodium.keyedBlake2b(key: secrets.withLock { $0.current }, input)
    }

    /// Whether `mac2` over `macInput` is made with a current or previous cookie for `input`.
    func mac2Valid(_ mac2: [UInt8], macInput: [UInt8], cookieInput: [UInt8]) -> Bool {
        guard mac2.contains(where: { $0 != 0 }) else { return false }
        let (current, previous) = secrets.withLock { ($0.current, $0.previous) }
        return [current, previous].contains { secret in
            Sodium.equal(Sodium.keyedBlake2b(key: Sodium.keyedBlake2b(key: secret, cookieInput), macInput), mac2)
        }
    }

    /// The current and previous cookie secrets (tests of their storage).
    var cookieSecrets: [SecretKeyBytes] { secrets.withLock { [$0.current, $0.previous] } }

    /// Replaces the cookie secret (the old one stays valid once more).
    func rotate() {
        let fresh = Sodium.randomSecret(32)
        secrets.withLock { $0 = (fresh, $0.current) }
    }

    /// The 46-byte cookie reply to an initiation from `input`'s endpoint.
    func cookieReply(senderIndex: UInt32, mac1: [UInt8], cookieInput: [UInt8]) -> [UInt8] {
        let cookie = cookie(for: cookieInput)
        let nonce = UInt64(RandomBytes.uint32()) << 32 | UInt64(RandomBytes.uint32())
        var w = ByteWriter(capacity: 46)
        w.u8(PacketType.cookieReply.rawValue)
        w.u8(revueProtocolVersion)
        w.u32(senderIndex)
        w.u64(nonce)
        w.append(Sodium.seal(key: cookieKey, nonce: nonce, ad: mac1, plaintext: cookie))
        return w.bytes
    }

    /// True when the datagram should go on to the main actor. Direct initiations with a bad mac1
    /// are dropped here; past half the load bucket, those without a valid mac2 get a cookie reply
    /// and are dropped. Everything else passes.
    func screen(_ bytes: UnsafeRawBufferPointer, from: SocketAddress) -> Bool {
        guard bytes.count >= 2, bytes[0] == PacketType.handshakeInitiation.rawValue, bytes[1] == revueProtocolVersion,
            bytes.count >= 6 + NoiseIKHandshake.message1Overhead + 9 + HandshakeMACs.trailerLength
        else { return true }
        let macStart = bytes.count - HandshakeMACs.trailerLength
        let mac1 = Array(bytes[macStart..<macStart + 16])
        guard Sodium.equal(Sodium.keyedBlake2b(key: mac1Key, UnsafeRawBufferPointer(rebasing: bytes[0..<macStart])), mac1) else {
            badMac1.add(1, ordering: .relaxed)
            return false
        }
        let now = scheduler.now
        tokens = min(burst, tokens + (now - tokensAt).inSeconds * rate)
        tokensAt = now
        tokens = max(0, tokens - 1)
        guard tokens < burst / 2 else { return true }
        let cookieInput = HandshakeMACs.endpointBytes(from)
        let mac2 = Array(bytes[(macStart + 16)...])
        if mac2.contains(where: { $0 != 0 }),
            mac2Valid(mac2, macInput: Array(bytes[0..<(macStart + 16)]), cookieInput: cookieInput)
        {
            return true
        }
        let senderIndex = UInt32(bytes[2]) | UInt32(bytes[3]) << 8 | UInt32(bytes[4]) << 16 | UInt32(bytes[5]) << 24
        let reply = cookieReply(senderIndex: senderIndex, mac1: mac1, cookieInput: cookieInput)
        cookieReplies.add(1, ordering: .relaxed)
        socket?.sendFromReceiveContext(reply, to: from)
        return false
    }
}
