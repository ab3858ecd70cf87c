import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// What a hand-driven rendezvous client keeps of its registration, and how it reads the node's
/// answers (shared by the clients on real sockets and on the simulated network).
@MainActor
protocol RendezvousRegistrationState: AnyObject {
    var keys: KeyPair { get }
    var nodeKey: [UInt8]? { get set }
    var macKey: [UInt8]? { get set }
    var cookie: [UInt8] { get set }
    var token: [UInt8]? { get set }
}

extension RendezvousRegistrationState {
    /// Reads a registration answer: the node key and cookie of an unsealed one, or the
    /// acceptance, cookie and relay token of a sealed one (opened under `macKey` with the nonce
    /// of the registration sent at `timestamp`); whether it accepted.
    func read(_ reply: [UInt8], timestamp: UInt64) -> Bool {
        var r = ByteReader(reply, offset: 2)
        switch r.u8() {
        case RendezvousAuth.registeredUnsealed:
            guard reply.count == RendezvousAuth.registeredUnsealedLength, let key = r.take(32), let c = r.take(16) else {
                return false
            }
            if key != nodeKey {
                nodeKey = key
                macKey = RendezvousAuth.key(secret: keys.secret, peerPublic: key)
            }
            cookie = c
            return false
        case RendezvousAuth.registeredSealed:
            guard reply.count == RendezvousAuth.registeredLength, let macKey, let nonce = r.u64(),
                nonce == timestamp | RendezvousAuth.registeredNonceBits,
                let plain = Sodium.open(key: macKey, nonce: nonce, ad: Array(reply[0..<11]), ciphertext: reply[11...])
            else { return false }
            cookie = Array(plain[1..<17])
            guard plain[0] == 1 else { return false }
            token = Array(plain[17..<33])
            return true
        default:
            return false
        }
    }
}

/// A hand-driven rendezvous client on its own loopback socket: the cookie round, registration,
/// lookups and relay sends, byte by byte, so attack tests can forge, replay and flood.
@MainActor
final class RendezvousClient: RendezvousRegistrationState {
    let socket: SessionSocket
    let keys: KeyPair
    let node: SocketAddress
    var replies: [[UInt8]] = []
    var nodeKey: [UInt8]?
    var macKey: [UInt8]?
    var cookie = [UInt8](repeating: 0, count: 16)
    var token: [UInt8]?
    var timestamp: UInt64 = 1

    let host: String

    init(nodePort: UInt16, keys: KeyPair = KeyPair(), host: String = "127.0.0.1") throws {
        socket = try SessionSocket(host: host, port: 0)
        self.host = host
        self.keys = keys
        node = SocketAddress(ip: 0x7F00_0001, port: nodePort)
        socket.start { [weak self] bytes, _ in MainActor.assumeIsolated { self?.replies.append(bytes) } }
    }

    var endpoint: SocketAddress { SocketAddress.sessionAddress(host: host, port: socket.localPort)! }

    /// A registration datagram for the registration key `keys` with `cookie` and `tags`, sealed
    /// with `macKey` (an empty, zero AEAD when nil).
    static func registration(
        keys: KeyPair, status: UInt8 = 1, timestamp: UInt64, cookie: [UInt8], macKey: [UInt8]?,
        tags: [[UInt8]] = []
    ) -> [UInt8] {
        var w = ByteWriter()
        w.u8(PacketType.rendezvousRegister.rawValue)
        w.u8(revueProtocolVersion)
        w.append(keys.publicKey)
        w.u64(timestamp)
        w.append(cookie)
        if let macKey {
            w.append(Sodium.seal(key: macKey, nonce: timestamp, ad: w.bytes, plaintext: [status] + tags.flatMap { $0 }))
        } else {
            w.append([UInt8](repeating: 0, count: 17))
        }
        return w.bytes
    }

    /// Tags sent with every registration.
    var tags: [[UInt8]] = []

    /// Waits for the next reply of `type` after `count` replies; nil after 2 s.
    func next(_ type: PacketType, after count: Int) async -> [UInt8]? {
        let deadline = MonotonicTime.now + .seconds(2)
        while MonotonicTime.now < deadline {
            if let r = replies.dropFirst(count).last(where: { $0.first == type.rawValue }) { return r }
            await settle(0.005)
        }
        return nil
    }

    /// Sends one registration and reads the answer: the node key, cookie and token it carries.
    @discardableResult
    func registerOnce() async -> Bool {
        let before = replies.count
        timestamp += 1
        let sent = timestamp
        socket.send(Self.registration(keys: keys, timestamp: timestamp, cookie: cookie, macKey: macKey, tags: tags), to: node)
        guard let reply = await next(.rendezvousRegistered, after: before) else { return false }
        return read(reply, timestamp: sent)
    }

    /// The cookie round then the real registration; true when accepted.
    func register() async -> Bool {
        for _ in 0..<3 where await registerOnce() == false {}
        return token != nil
    }

    var lookupNonce: UInt64 = 100

    /// Asks where the holder of `tag` is (sealed under the registration key); the endpoint from
    /// an answer that opens with that key and names the tag, nil otherwise.
    func lookup(_ tag: [UInt8]) async -> SocketAddress? {
        guard let macKey else { return nil }
        lookupNonce += 1
        var w = ByteWriter()
        w.u8(PacketType.rendezvousLookup.rawValue)
        w.u8(revueProtocolVersion)
        w.append(keys.publicKey)
        w.u64(lookupNonce)
        w.append(Sodium.seal(key: macKey, nonce: lookupNonce, ad: w.bytes, plaintext: tag))
        let before = replies.count
        socket.send(w.bytes, to: node)
        guard let reply = await next(.rendezvousLookupReply, after: before),
            reply.count == RendezvousAuth.lookupReplyLength(.ipv4),
            let plain = Sodium.open(key: macKey, nonce: lookupNonce | 1 << 63, ad: Array(reply[0..<10]), ciphertext: reply[10...])
        else { return nil }
        var r = ByteReader(plain)
        guard r.take(16) == tag, r.u8() == 1, r.u8() != nil, r.u16() != nil else { return nil }
        return r.endpoint()
    }

    /// Waits (yielding the main actor) until `condition` holds, at most 5 s.
    func wait(_ condition: () -> Bool) async {
        let deadline = MonotonicTime.now + .seconds(5)
        while !condition() && MonotonicTime.now < deadline { await settle(0.01) }
    }

    func close() { socket.close() }
}

/// The tag a peer registers for holders of its address (this epoch): what a stranger with the
/// address looks it up by.
@MainActor
func requestTag(of peer: TestPeer) -> [UInt8] {
    let core = peer.revue.core!
    return PrivacyTags.request(
        publicKey: core.identity.publicKey, nospam: core.profile.nospam, epoch: PrivacyTags.epoch(core.wallNow()))
}

/// Sends UDP datagrams with any IPv4 source address and port through a raw socket (root only):
/// spoofed traffic to loopback for attack tests.
final class RawUDPSender: @unchecked Sendable {
    let fd: Int32

    /// Nil when raw sockets are not allowed (not root).
    init?() {
        fd = socket(AF_INET, Int32(SOCK_RAW.rawValue), Int32(IPPROTO_RAW))
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_HDRINCL, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    /// One datagram from `source` to `destination` (IPv4 and UDP headers built here; the kernel
    /// fills the IP checksum, the UDP checksum is left 0 as IPv4 allows).
    @discardableResult
    func send(_ payload: [UInt8], from source: SocketAddress, to destination: SocketAddress) -> Bool {
        let total = 28 + payload.count
        var p = [UInt8](repeating: 0, count: total)
        p[0] = 0x45
        p[2] = UInt8(total >> 8); p[3] = UInt8(total & 255)
        p[8] = 64; p[9] = 17
        for i in 0..<4 {
            p[12 + i] = UInt8(truncatingIfNeeded: source.ip >> (24 - 8 * UInt32(i)))
            p[16 + i] = UInt8(truncatingIfNeeded: destination.ip >> (24 - 8 * UInt32(i)))
        }
        p[20] = UInt8(source.port >> 8); p[21] = UInt8(source.port & 255)
        p[22] = UInt8(destination.port >> 8); p[23] = UInt8(destination.port & 255)
        let udpLength = 8 + payload.count
        p[24] = UInt8(udpLength >> 8); p[25] = UInt8(udpLength & 255)
        p.replaceSubrange(28..., with: payload)
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_addr.s_addr = destination.ip.bigEndian
        let n = p.withUnsafeBytes { b in
            withUnsafePointer(to: &to) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, b.baseAddress, total, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return n == total
    }
}

/// Resident set size of a process in kB (VmRSS of /proc/PID/status); nil when unreadable.
func residentKilobytes(pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return nil }
    return Int(line.split(separator: " ").dropFirst().first ?? "")
}
