// A rendezvous node: friends register where they are (the endpoint the node sees) and their
// status, look up each other's endpoints, and relay Noise packets when no direct path works.
// The node sees per-node registration keys, blinded tags and endpoints, never a long-term key or a
// session key: relayed packets stay encrypted end to end. Run it with `revue-node --rendezvous`, or in process for tests. It also answers
// STUN Binding requests (RFC 8489), so any STUN client can learn its public address from it.
package import MediaCore

/// A rendezvous node on one UDP socket. Main actor (datagrams hop there); O(1) per datagram,
/// plus a sweep of expired entries once a second.
///
/// Registrations are keyed by a registration key (random per node and run at the peer, not its
/// long-term key) and carry, encrypted to the node, the tags (`PrivacyTags`) the peer is looked up
/// by; lookups and relay sends name a tag. What a stranger can make it keep is bounded: at most
/// `maxEntries` registrations, at most `maxEntriesPerPrefix` from one network (an IPv4 /24 or an
/// IPv6 /56), at most `maxTagsPerEntry` tags per registration, `maxTagsPerPrefix` per network and `maxTags` in all, and
/// `maxSources` per-source rate buckets. A
/// registration must carry a cookie (a MAC of the sender's address the node sent there) before
/// the node spends an X25519 on an unknown key, so spoofed sources cost it one BLAKE2b and an
/// answer no larger than the question. Relaying needs the token handed to an accepted
/// registration and is rate limited per registration.
///
/// STUN: a datagram whose first byte is 0-3 (RFC 7983) that parses as a Binding request (with a
/// valid FINGERPRINT when it has one) gets a Binding success response with XOR-MAPPED-ADDRESS
/// and FINGERPRINT (40 bytes for IPv4), but only when the request is at least as large as that
/// answer: a client pads its request (a SOFTWARE or PADDING attribute of 12 bytes or more), so a
/// spoofed source never gets back more bytes than were sent. Answers are rate limited globally
/// and per source (an IPv4 address or an IPv6 /64) (`bindingRate`, `bindingRatePerSource`, at most `maxBindingSources` buckets).
@MainActor
public final class RendezvousNode {
    private struct Entry {
        var endpoint: SocketAddress
        var status: UInt8
        var lastSeen: MonotonicTime
        var timestamp: UInt64
        let macKey: SecretKeyBytes
        var token: [UInt8]
        var relayTokens: Double
        var relayAt: MonotonicTime
        /// Tags this registration is found by, and when each was last registered.
        var tags: [[UInt8]: MonotonicTime] = [:]
    }

    /// Nil for the fuzzing node, which only answers through `sendTap`.
    private let socket: (any DatagramPort)?
    /// The node's clock (the real one, or a test's simulated one).
    private let scheduler: any TaskScheduler
    /// Sees every datagram the node sends (fuzzing and tests); nil in production.
    package var sendTap: (([UInt8], SocketAddress) -> Void)?
    /// Sees every datagram the node receives: what a curious operator sees on the wire (tests);
    /// nil in production. Main actor, called before the datagram is handled.
    package var receiveTap: (([UInt8], SocketAddress) -> Void)?
    /// Sees every plaintext the node opens (a registration's status and tags, a lookup's tag):
    /// what a curious operator reads (tests); nil in production. Main actor.
    package var openedTap: (([UInt8]) -> Void)?
    private let identity = KeyPair()
    private var entries: [[UInt8]: Entry] = [:]
    /// Tag -> the registration key that registered it last.
    private var tagOwners: [[UInt8]: [UInt8]] = [:]
    /// Entries per network (`SocketAddress.prefixKey`: an IPv4 /24 or an IPv6 /56).
    private var perPrefix: [UInt64: Int] = [:]
    /// Tags held by the entries of each network (`prefixKey`).
    private var tagsPerPrefix: [UInt64: Int] = [:]
    /// Per source (`SocketAddress.sourceKey`: an IPv4 address or an IPv6 /64): tokens for X25519 work on unknown keys (rate `keyRate`).
    private var sourceTokens: [UInt64: (tokens: Double, at: MonotonicTime)] = [:]
    /// Binding answers: the global bucket and one per source (IPv4 address or IPv6 /64).
    private var bindingTokens: (tokens: Double, at: MonotonicTime)
    private var bindingSourceTokens: [UInt64: (tokens: Double, at: MonotonicTime)] = [:]
    private var cookieSecret = Sodium.randomSecret(32)
    private var previousCookieSecret = Sodium.randomSecret(32)
    private var cookieSecretAt: MonotonicTime
    private var lastSweep: MonotonicTime

    /// The secrets the node holds now: each registration's MAC key, then the two cookie secrets
    /// (tests of their storage). Main actor; cost: one pass over the registrations.
    var heldSecrets: [SecretKeyBytes] { entries.values.map(\.macKey) + [cookieSecret, previousCookieSecret] }

    /// Registrations kept at most.
    public static let maxEntries = 65_536
    /// Tags one registration may hold at most.
    public static let maxTagsPerEntry = 512
    /// Tags held at most in all.
    public static let maxTags = 262_144
    /// Tags held at most by the registrations of one network (IPv4 /24, IPv6 /56).
    public static let maxTagsPerPrefix = 16_384
    /// A tag moves to a registration from another IP address only after its holder has not
    /// registered it for this long (seconds; peers register every second).
    public static let tagTakeoverAge = 3.0
    /// Registrations kept at most from one network (IPv4 /24, IPv6 /56).
    public static let maxEntriesPerPrefix = 256
    /// Source addresses with a rate bucket at most (more are refused until the next sweep).
    public static let maxSources = 65_536
    /// New keys one source address may have checked per second (each costs an X25519).
    public static let keyRate = 20.0
    /// Bucket size for `keyRate`: new keys one source may have checked at once.
    public static let keyBurst = 40.0
    /// Binding answers per second in total.
    public static let bindingRate = 2000.0
    /// Bucket size for `bindingRate`: Binding answers sent at once in total.
    public static let bindingBurst = 4000.0
    /// Binding answers per second to one source (IPv4 address or IPv6 /64).
    public static let bindingRatePerSource = 10.0
    /// Bucket size for `bindingRatePerSource`: Binding answers to one source at once.
    public static let bindingBurstPerSource = 20.0
    /// Source IPs with a Binding rate bucket at most (more are refused until the sweep).
    public static let maxBindingSources = 4096
    /// Relayed datagrams per second one registration may send.
    public static let relayRate = 2000.0
    /// Bucket size for `relayRate`: datagrams one registration may relay at once.
    public static let relayBurst = 4000.0

    /// Datagrams forwarded by the relay so far.
    public private(set) var relayedPackets = 0
    /// Datagrams dropped as malformed, unauthenticated (relay token, lookup MAC) or from
    /// unregistered senders.
    public private(set) var droppedPackets = 0
    /// Registrations refused (no valid cookie yet, unknown node key, bad MAC, replayed timestamp).
    public private(set) var refusedRegistrations = 0
    /// Registrations, relayed datagrams and key checks refused by a cap or a rate limit.
    public private(set) var refusedForLimits = 0
    /// Binding requests answered so far.
    public private(set) var bindingAnswers = 0
    /// STUN datagrams dropped: not a Binding request, unparsable, a bad FINGERPRINT, or smaller
    /// than their answer would be (over-limit ones count in `refusedForLimits`).
    public private(set) var bindingDropped = 0
    /// Expired registrations removed by the sweep so far.
    public private(set) var sweptEntries = 0
    /// X25519 operations done for unknown keys so far.
    public private(set) var keyAgreements = 0
    /// Registrations currently held.
    public var entryCount: Int { entries.count }
    /// Tags currently held.
    public var tagCount: Int { tagOwners.count }
    /// Everything the node holds about registrations, for tests that play a curious node: per
    /// registration key, its endpoint, status and tags. O(entries + tags).
    package var storedState: [(key: [UInt8], endpoint: SocketAddress, status: UInt8, tags: [[UInt8]])] {
        entries.map { ($0.key, $0.value.endpoint, $0.value.status, Array($0.value.tags.keys)) }
    }
    /// Registrations older than this are forgotten (seconds).
    public var expiry: Double = 10
    /// `expiry` as a duration.
    private var expiryDuration: Duration { .seconds(clamping: expiry) }

    /// The UDP port the node listens on.
    public var port: UInt16 { socket?.localPort ?? 0 }

    /// Binds the node's socket (`port` 0 picks one) and starts serving.
    public convenience init(host: String = "0.0.0.0", port: UInt16 = 0) throws(RevueError) {
        self.init(socket: try SessionSocket(host: host, port: port), scheduler: DispatchTaskScheduler.main)
    }

    /// A node serving on `socket` (started here) on `scheduler`'s clock: tests run one on a
    /// simulated network.
    package init(socket s: any DatagramPort, scheduler: any TaskScheduler) {
        socket = s
        self.scheduler = scheduler
        let start = scheduler.now
        bindingTokens = (Self.bindingBurst, start)
        cookieSecretAt = start
        lastSweep = start
        s.start(screen: nil) { [weak self] bytes, from in
            MainActor.assumeIsolated { self?.handle(bytes, from: from) }
        }
    }

    /// A node without a socket, for the rendezvous fuzzer: datagrams go in through `handle`,
    /// answers come out through `sendTap`.
    package init(socketless: Void) {
        socket = nil
        scheduler = DispatchTaskScheduler.main
        let start = scheduler.now
        bindingTokens = (Self.bindingBurst, start)
        cookieSecretAt = start
        lastSweep = start
    }

    /// Closes the socket.
    public func stop() { socket?.close() }

    private func send(_ bytes: [UInt8], to address: SocketAddress) {
        sendTap?(bytes, address)
        socket?.send(bytes, to: address)
    }

    private func cookie(for a: SocketAddress, secret: SecretKeyBytes) -> [UInt8] {
        Sodium.keyedBlake2b(key: secret, HandshakeMACs.endpointBytes(a))
    }

    /// Removes expired registrations and idle rate buckets; rotates the cookie secret every
    /// two minutes. O(entries), at most once a second.
    private func sweep(now: MonotonicTime) {
        guard now - lastSweep >= .seconds(1) else { return }
        lastSweep = now
        if now - cookieSecretAt >= .seconds(120) {
            previousCookieSecret = cookieSecret
            cookieSecret = Sodium.randomSecret(32)
            cookieSecretAt = now
        }
        let expiry = expiryDuration
        let before = entries.count
        entries = entries.filter { now - $0.value.lastSeen <= expiry }
        sweptEntries += before - entries.count
        if before != entries.count {
            perPrefix = [:]
            for e in entries.values { perPrefix[e.endpoint.prefixKey, default: 0] += 1 }
        }
        // Tags not registered again within the expiry go, with their owners' index.
        var owners: [[UInt8]: [UInt8]] = [:]
        owners.reserveCapacity(tagOwners.count)
        var counts: [UInt64: Int] = [:]
        for (key, var e) in entries {
            let kept = e.tags.filter { now - $0.value <= expiry && tagOwners[$0.key] == key }
            if kept.count != e.tags.count {
                e.tags = kept
                entries[key] = e
            }
            for tag in kept.keys { owners[tag] = key }
            if !kept.isEmpty { counts[e.endpoint.prefixKey, default: 0] += kept.count }
        }
        tagOwners = owners
        tagsPerPrefix = counts
        sourceTokens = sourceTokens.filter { (now - $0.value.at).inSeconds < Self.keyBurst / Self.keyRate }
        bindingSourceTokens = bindingSourceTokens.filter {
            (now - $0.value.at).inSeconds < Self.bindingBurstPerSource / Self.bindingRatePerSource
        }
    }

    /// Answers a STUN Binding request (see the type's comment); anything else STUN-like is dropped
    /// and counted. One parse, one CRC-32 and at most one answer no larger than the request.
    private func answerBinding(_ bytes: [UInt8], from: SocketAddress, now: MonotonicTime) {
        // 20-byte header, XOR-MAPPED-ADDRESS (IPv4: 4 + 8), FINGERPRINT (4 + 4).
        let answerSize = 20 + (from.family == .ipv4 ? 12 : 24) + 8
        guard let request = try? STUNMessage(parsing: bytes), request.method == .binding, request.messageClass == .request,
            request.value(STUNMessage.AttributeType.fingerprint) == nil || STUNMessage.hasValidFingerprint(bytes),
            bytes.count >= answerSize
        else {
            bindingDropped += 1
            return
        }
        bindingTokens.tokens = min(
            Self.bindingBurst, bindingTokens.tokens + (now - bindingTokens.at).inSeconds * Self.bindingRate)
        bindingTokens.at = now
        guard bindingSourceTokens.count < Self.maxBindingSources || bindingSourceTokens[from.sourceKey] != nil else {
            refusedForLimits += 1
            return
        }
        var bucket = bindingSourceTokens[from.sourceKey] ?? (Self.bindingBurstPerSource, now)
        bucket.tokens = min(Self.bindingBurstPerSource, bucket.tokens + (now - bucket.at).inSeconds * Self.bindingRatePerSource)
        bucket.at = now
        guard bucket.tokens >= 1, bindingTokens.tokens >= 1 else {
            bindingSourceTokens[from.sourceKey] = bucket
            refusedForLimits += 1
            return
        }
        bucket.tokens -= 1
        bindingSourceTokens[from.sourceKey] = bucket
        bindingTokens.tokens -= 1
        var answer = STUNMessage(method: .binding, class: .successResponse, transactionID: request.transactionID)
        answer.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, from)
        bindingAnswers += 1
        send(answer.encode(fingerprint: true), to: from)
    }

    /// Handles one datagram (the socket's callback; also the rendezvous fuzzer's entry).
    package func handle(_ bytes: [UInt8], from: SocketAddress) {
        receiveTap?(bytes, from)
        if let first = bytes.first, STUNMessage.mayBeSTUN(firstByte: first) {
            let now = scheduler.now
            sweep(now: now)
            return answerBinding(bytes, from: from, now: now)
        }
        var r = ByteReader(bytes, offset: 1)
        guard let first = bytes.first, let type = PacketType(rawValue: first), r.u8() == revueProtocolVersion else {
            droppedPackets += 1
            return
        }
        let now = scheduler.now
        sweep(now: now)
        let expiry = expiryDuration
        switch type {
        case .rendezvousRegister:
            guard bytes.count >= RendezvousAuth.registerLength,
                bytes.count <= RendezvousAuth.registerLength + 16 * RendezvousAuth.maxTagsPerRegistration,
                (bytes.count - RendezvousAuth.registerLength) % 16 == 0, let key = r.take(32),
                let timestamp = r.u64(), let cookie = r.take(16)
            else { droppedPackets += 1; return }
            let accepted = register(bytes, key: key, timestamp: timestamp, cookie: cookie, from: from, now: now)
            var w = ByteWriter(capacity: RendezvousAuth.registeredLength)
            w.u8(PacketType.rendezvousRegistered.rawValue)
            w.u8(revueProtocolVersion)
            w.u8(accepted ? 1 : 0)
            w.append(identity.publicKey)
            w.append(self.cookie(for: from, secret: cookieSecret))
            w.append(accepted ? entries[key]!.token : [UInt8](repeating: 0, count: 16))
            send(w.bytes, to: from)
        case .rendezvousLookup:
            guard bytes.count == RendezvousAuth.lookupLength, let asker = r.take(32), let nonce = r.u64(), nonce >> 63 == 0,
                let a = entries[asker], a.endpoint == from, now - a.lastSeen <= expiry,
                let tag = Sodium.open(key: a.macKey, nonce: nonce, ad: Array(bytes[0..<42]), ciphertext: bytes[42...]),
                tag.count == 16
            else {
                droppedPackets += 1
                return
            }
            openedTap?(tag)
            var p = ByteWriter(capacity: 39)
            p.append(tag)
            let found = tagOwners[tag].flatMap { entries[$0] }.flatMap { e in
                now - e.lastSeen <= expiry && e.tags[tag].map { now - $0 <= expiry } == true ? e : nil
            }
            if let e = found {
                p.u8(1)
                p.u8(e.status)
                p.u16(UInt16(min(65_535, (now - e.lastSeen).inSeconds)))
                p.endpoint(e.endpoint)
            } else {
                p.u8(0); p.u8(0); p.u16(0)
            }
            var w = ByteWriter(capacity: RendezvousAuth.lookupReplyLength(found?.endpoint.family))
            w.u8(PacketType.rendezvousLookupReply.rawValue)
            w.u8(revueProtocolVersion)
            w.u64(nonce | 1 << 63)
            w.append(Sodium.seal(key: a.macKey, nonce: nonce | 1 << 63, ad: w.bytes, plaintext: p.bytes))
            send(w.bytes, to: from)
        case .relaySend:
            guard let source = r.take(32), let token = r.take(16), let target = r.take(16), let sourceTag = r.take(16),
                r.remaining > 0,
                var s = entries[source], s.endpoint == from, now - s.lastSeen <= expiry, Sodium.equal(s.token, token),
                tagOwners[sourceTag] == source, s.tags[sourceTag] != nil,
                let owner = tagOwners[target], let e = entries[owner], now - e.lastSeen <= expiry
            else { droppedPackets += 1; return }
            s.relayTokens = min(Self.relayBurst, s.relayTokens + (now - s.relayAt).inSeconds * Self.relayRate)
            s.relayAt = now
            guard s.relayTokens >= 1 else {
                entries[source] = s
                refusedForLimits += 1
                return
            }
            s.relayTokens -= 1
            entries[source] = s
            var w = ByteWriter(capacity: bytes.count)
            w.u8(PacketType.relayDeliver.rawValue)
            w.u8(revueProtocolVersion)
            w.append(sourceTag)
            w.append(r.rest())
            send(w.bytes, to: e.endpoint)
            relayedPackets += 1
        default:
            droppedPackets += 1
        }
    }

    /// Checks and stores one registration; true when accepted. The tags it carries are added to
    /// (or refresh) the registration's, within the caps; a tag another key holds moves to this one
    /// when it comes from the holder's IP address or the holder stopped registering it
    /// (`tagTakeoverAge`).
    private func register(
        _ bytes: [UInt8], key: [UInt8], timestamp: UInt64, cookie: [UInt8], from: SocketAddress, now: MonotonicTime
    ) -> Bool {
        // The cookie first (one BLAKE2b): a spoofed source never saw it.
        guard
            Sodium.equal(cookie, self.cookie(for: from, secret: cookieSecret))
                || Sodium.equal(cookie, self.cookie(for: from, secret: previousCookieSecret))
        else {
            refusedRegistrations += 1
            return false
        }
        let macKey: SecretKeyBytes
        if let e = entries[key] {
            macKey = e.macKey
        } else {
            guard sourceTokens.count < Self.maxSources || sourceTokens[from.sourceKey] != nil else {
                refusedForLimits += 1
                return false
            }
            var bucket = sourceTokens[from.sourceKey] ?? (Self.keyBurst, now)
            bucket.tokens = min(Self.keyBurst, bucket.tokens + (now - bucket.at).inSeconds * Self.keyRate)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                sourceTokens[from.sourceKey] = bucket
                refusedForLimits += 1
                return false
            }
            bucket.tokens -= 1
            sourceTokens[from.sourceKey] = bucket
            keyAgreements += 1
            guard let k = RendezvousAuth.heldKey(secret: identity.secret, peerPublic: key) else {
                refusedRegistrations += 1
                return false
            }
            macKey = k
        }
        let header = Array(bytes[0..<RendezvousAuth.registerHeaderLength])
        guard
            let plain = Sodium.open(
                key: macKey, nonce: timestamp, ad: header, ciphertext: bytes[RendezvousAuth.registerHeaderLength...]),
            let status = plain.first, (plain.count - 1) % 16 == 0,
            timestamp > entries[key]?.timestamp ?? 0
        else {
            refusedRegistrations += 1
            return false
        }
        openedTap?(plain)
        var e: Entry
        if let old = entries[key] {
            e = old
            if e.endpoint != from {
                perPrefix[e.endpoint.prefixKey, default: 1] -= 1
                perPrefix[from.prefixKey, default: 0] += 1
                tagsPerPrefix[e.endpoint.prefixKey, default: e.tags.count] -= e.tags.count
                tagsPerPrefix[from.prefixKey, default: 0] += e.tags.count
                e.endpoint = from
                e.token = RandomBytes.bytes(16)
            }
        } else {
            guard entries.count < Self.maxEntries, perPrefix[from.prefixKey, default: 0] < Self.maxEntriesPerPrefix else {
                refusedForLimits += 1
                return false
            }
            perPrefix[from.prefixKey, default: 0] += 1
            e = Entry(
                endpoint: from, status: status, lastSeen: now, timestamp: timestamp, macKey: macKey,
                token: RandomBytes.bytes(16), relayTokens: Self.relayBurst, relayAt: now)
        }
        e.status = status
        e.lastSeen = now
        e.timestamp = timestamp
        var i = 1
        while i + 16 <= plain.count {
            let tag = Array(plain[i..<(i + 16)])
            i += 16
            if e.tags[tag] == nil {
                guard e.tags.count < Self.maxTagsPerEntry, tagOwners[tag] != nil || tagOwners.count < Self.maxTags,
                    tagsPerPrefix[from.prefixKey, default: 0] < Self.maxTagsPerPrefix
                else {
                    refusedForLimits += 1
                    continue
                }
                if let owner = tagOwners[tag], owner != key, let held = entries[owner] {
                    // Someone who saw a tag (on path, in a relay send) cannot take it over: it
                    // moves only to the holder's address (a restart, a new registration key) or
                    // once the holder stopped registering it.
                    guard
                        held.endpoint.addressBytes == from.addressBytes
                            || now.since(held.tags[tag]) > .seconds(Self.tagTakeoverAge)
                    else {
                        refusedForLimits += 1
                        continue
                    }
                    if held.tags[tag] != nil {
                        entries[owner]?.tags[tag] = nil
                        tagsPerPrefix[held.endpoint.prefixKey, default: 1] -= 1
                    }
                }
                tagsPerPrefix[from.prefixKey, default: 0] += 1
            }
            tagOwners[tag] = key
            e.tags[tag] = now
        }
        entries[key] = e
        return true
    }
}
