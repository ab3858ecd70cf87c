// A rendezvous node: friends register where they are (the endpoint the node sees) and their
// status, look up each other's endpoints, and relay Noise packets when no direct path works.
// The node sees per-node registration keys, blinded tags and endpoints, never a long-term key or a
// session key: relayed packets stay encrypted end to end. Run it with `revue-node --rendezvous`,
// or in process for tests. It also answers STUN Binding requests (RFC 8489), so any STUN client
// can learn its public address from it.
package import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A rendezvous node on one UDP socket. Main actor (datagrams hop there); O(1) per datagram
/// (amortised), plus a sweep of expired entries once a second.
///
/// Registrations are keyed by a registration key (random per node and run at the peer, not its
/// long-term key) and carry, encrypted to the node, the tags (`PrivacyTags`) the peer is looked up
/// by; lookups and relay sends name a tag. What a stranger can make it keep is bounded (`Limits`):
/// registrations and tags in all, per network at two widths (an IPv4 /24 or IPv6 /56, and an IPv4
/// /16 or IPv6 /48), tags per registration, and the per-source rate buckets. Networks beyond
/// their first few registrations (or tags) share only part of the capacity, the rest being kept
/// for networks that hold few; when full, the node evicts from the heaviest network rather than
/// refuse a lighter one. The caps apply when a registration moves to another network too.
///
/// A registration must carry a cookie (a MAC of the sender's address the node sent there)
/// before the node spends an X25519 on an unknown key, so spoofed sources cost it one BLAKE2b and
/// an unsealed answer (key and cookie) smaller than the question, sent at a per-source and a
/// total rate. A registration that opens under its key with a growing timestamp is answered
/// sealed to that key (acceptance, cookie, relay token), so nobody else can forge or replay the
/// answer. Lookups are rate limited per registration and each nonce is answered once; relaying
/// needs the token handed to an accepted registration and is rate limited per registration.
///
/// STUN: a datagram whose first byte is 0-3 (RFC 7983) that parses as a Binding request (with a
/// valid FINGERPRINT when it has one) gets a Binding success response with XOR-MAPPED-ADDRESS
/// and FINGERPRINT (40 bytes for IPv4), but only when the request is at least as large as that
/// answer: a client pads its request (a SOFTWARE or PADDING attribute of 12 bytes or more), so a
/// spoofed source never gets back more bytes than were sent. Answers are rate limited globally
/// and per source (an IPv4 address or an IPv6 /64) (`bindingRate`, `bindingRatePerSource`, at
/// most `maxBindingSources` buckets).
///
/// TURN credentials (`turnOffer`): a registered peer asks with a request sealed under its
/// registration's MAC key (`PacketType.turnCredentialsRequest`) and gets coturn shared-secret
/// credentials for the node's TURN servers, sealed the same way, each request nonce answered
/// once. Only a registration that is held, fresh and at the asking endpoint gets any; each is
/// rate limited (`Limits.credentialBurst` at once, `Limits.credentialRequestsPerLifetime` per
/// lifetime after that), as are networks (an IPv4 /24 or IPv6 /56) and the node in all. The node
/// keeps nothing per credential: they are made from the secret and the registration key.
@MainActor
public final class RendezvousNode {
    /// The caps and rates one node applies. The defaults are the type's constants (the production
    /// values); tests of the mechanisms give smaller caps, in the same proportions, so a flood
    /// that fills them stays short. Value type, fixed for a node's life.
    package struct Limits: Sendable {
        /// Registrations kept at most.
        package var maxEntries = RendezvousNode.maxEntries
        /// Registrations kept at most from one IPv4 /24 or IPv6 /56.
        package var maxEntriesPerPrefix = RendezvousNode.maxEntriesPerPrefix
        /// Registrations kept at most from one IPv4 /16 or IPv6 /48.
        package var maxEntriesPerWidePrefix = RendezvousNode.maxEntriesPerWidePrefix
        /// How many registrations a /16 or /48 holds before the rest count as bulk.
        package var smallNetworkEntries = 16
        /// Registrations bulk may never take: kept for networks that hold few.
        package var reservedEntries = 16_384
        /// Tags one registration may hold at most.
        package var maxTagsPerEntry = RendezvousNode.maxTagsPerEntry
        /// Tags held at most in all.
        package var maxTags = RendezvousNode.maxTags
        /// Tags held at most by the registrations of one IPv4 /24 or IPv6 /56.
        package var maxTagsPerPrefix = RendezvousNode.maxTagsPerPrefix
        /// Tags held at most by the registrations of one IPv4 /16 or IPv6 /48.
        package var maxTagsPerWidePrefix = RendezvousNode.maxTagsPerWidePrefix
        /// How many tags a /16 or /48 holds before the rest count as bulk.
        package var smallNetworkTags = 1024
        /// Tags bulk may never take: kept for networks that hold few.
        package var reservedTags = 65_536
        /// Lookups per second one registration may have answered.
        package var lookupRate = 1024.0
        /// Bucket size for `lookupRate`: lookups one registration may have answered at once.
        package var lookupBurst = 2048.0
        /// Unsealed registration answers (key and cookie) per second in total.
        package var cookieAnswerRate = 2000.0
        /// Bucket size for `cookieAnswerRate`.
        package var cookieAnswerBurst = 4000.0
        /// Unsealed registration answers per second to one source (IPv4 address or IPv6 /64).
        package var cookieAnswerRatePerSource = 10.0
        /// Bucket size for `cookieAnswerRatePerSource`.
        package var cookieAnswerBurstPerSource = 20.0
        /// Sources with an unsealed-answer bucket at most (more are refused until the sweep).
        package var maxCookieAnswerSources = 4096
        /// TURN credentials one registration may have answered at once.
        package var credentialBurst = 3.0
        /// TURN credentials one registration may have answered per credential lifetime, after
        /// the burst (a peer asks once per half lifetime).
        package var credentialRequestsPerLifetime = 4.0
        /// TURN credentials answered per second in total.
        package var credentialRate = 500.0
        /// Bucket size for `credentialRate`.
        package var credentialRateBurst = 1000.0
        /// TURN credentials answered per second to the registrations of one network (IPv4 /24,
        /// IPv6 /56).
        package var credentialRatePerNetwork = 2.0
        /// Bucket size for `credentialRatePerNetwork`.
        package var credentialBurstPerNetwork = 64.0
        /// Networks with a credentials bucket at most (more are refused until the sweep).
        package var maxCredentialNetworks = 4096

        /// The production values.
        package init() {}
    }

    private struct Entry {
        var endpoint: SocketAddress
        var status: UInt8
        var lastSeen: MonotonicTime
        /// The last timestamp that opened under `macKey`: a later one is needed, and each
        /// sealed answer's nonce is made of one.
        var timestamp: UInt64
        let macKey: SecretKeyBytes
        var token: [UInt8]
        var relay: TokenBucket
        var lookups: TokenBucket
        /// The four highest lookup nonces answered: a nonce must be above the lowest and not
        /// among them, so each is answered (and its answer sealed) once.
        var lookupNonces: SIMD4<UInt64> = .zero
        /// Tags this registration is found by, and when each was last registered; every one of
        /// them has this registration as its owner (`tagOwners`).
        var tags: [[UInt8]: MonotonicTime] = [:]
        /// The highest TURN credentials request nonce answered (at first the timestamp of the
        /// registration that made the entry): a request needs a higher one, so each answer's
        /// nonce seals once.
        var credentialsNonce: UInt64
        /// TURN credentials answered to this registration (`Limits.credentialBurst`).
        var credentials: TokenBucket
    }

    /// What a registration is answered with.
    private enum Answer {
        /// It opened under its key with a growing timestamp (now spent): sealed to that key,
        /// accepted or not.
        case sealed(accepted: Bool, macKey: SecretKeyBytes)
        /// It did not (no cookie yet, an unknown key over the rate, a bad seal, an old
        /// timestamp), or nothing could hold its timestamp: the node key and a cookie, unsealed.
        case unsealed
    }

    /// Nil for the fuzzing node, which only answers through `sendTap`.
    private let socket: (any DatagramPort)?
    /// The node's clock (the real one, or a test's simulated one).
    private let scheduler: any TaskScheduler
    /// The caps and rates this node applies.
    package let limits: Limits
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
    /// Tag -> the registration key that holds it.
    private var tagOwners: [[UInt8]: [UInt8]] = [:]
    /// Registrations per network, narrow (`prefixKey`: IPv4 /24, IPv6 /56) and wide
    /// (`widePrefixKey`: IPv4 /16, IPv6 /48).
    private var entryLoad: NetworkLoad
    private var entryWideLoad: NetworkLoad
    /// Tags held by the registrations of each network, narrow and wide.
    private var tagLoad: NetworkLoad
    private var tagWideLoad: NetworkLoad
    /// The registration keys of each wide network, oldest first (eviction takes the oldest, so
    /// which registration goes does not depend on hashing).
    private var members: [UInt64: ArrivalOrder<[UInt8]>] = [:]
    /// Per source (`SocketAddress.sourceKey`): tokens for X25519 work on unknown keys (`keyRate`).
    private var sourceTokens: [UInt64: TokenBucket] = [:]
    /// Binding answers, in total and per source.
    private var binding: RateLimiter
    /// Unsealed registration answers, in total and per source.
    private var cookieAnswerLimiter: RateLimiter
    /// TURN credentials answers, in total and per network (`prefixKey`).
    private var credentialLimiter: RateLimiter
    /// The TURN servers and secret this node hands credentials for; nil: it answers requests with
    /// no server. Main actor; set before serving (revue-node does) or at any time.
    package var turnOffer: TURNOffer?
    /// Seconds since 1970, for the credentials' expiry (a test's clock in simulated runs).
    package var wallClock: @Sendable () -> Double = { Double(time(nil)) }
    /// Keys the id in each TURN user name: a registration key's id says nothing about the key.
    private let turnIdSecret = Sodium.randomSecret(32)
    private var cookieSecret = Sodium.randomSecret(32)
    private var previousCookieSecret = Sodium.randomSecret(32)
    private var cookieSecretAt: MonotonicTime
    private var lastSweep: MonotonicTime

    /// The secrets the node holds now: each registration's MAC key, then the two cookie secrets
    /// (tests of their storage). Main actor; cost: one pass over the registrations.
    var heldSecrets: [SecretKeyBytes] { entries.values.map(\.macKey) + [cookieSecret, previousCookieSecret] }

    /// Registrations kept at most.
    nonisolated public static let maxEntries = 65_536
    /// Tags one registration may hold at most.
    nonisolated public static let maxTagsPerEntry = 512
    /// Tags held at most in all.
    nonisolated public static let maxTags = 262_144
    /// Tags held at most by the registrations of one network (IPv4 /24, IPv6 /56).
    nonisolated public static let maxTagsPerPrefix = 16_384
    /// Tags held at most by the registrations of one wide network (IPv4 /16, IPv6 /48).
    nonisolated public static let maxTagsPerWidePrefix = 32_768
    /// A tag moves to a registration from another IP address only after its holder has not
    /// registered it for this long (seconds; peers register every second).
    public static let tagTakeoverAge = 3.0
    /// Registrations kept at most from one network (IPv4 /24, IPv6 /56).
    nonisolated public static let maxEntriesPerPrefix = 256
    /// Registrations kept at most from one wide network (IPv4 /16, IPv6 /48).
    nonisolated public static let maxEntriesPerWidePrefix = 4096
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
    /// Datagrams dropped as malformed, unauthenticated (relay token, lookup MAC), replayed
    /// (a lookup nonce answered before) or from unregistered senders.
    public private(set) var droppedPackets = 0
    /// Registrations refused (no valid cookie yet, unknown node key, bad MAC, replayed timestamp).
    public private(set) var refusedRegistrations = 0
    /// Registrations, tags, lookups, relayed datagrams and key checks refused by a cap or a rate
    /// limit.
    public private(set) var refusedForLimits = 0
    /// Unsealed registration answers (node key and cookie) sent so far.
    public private(set) var cookieAnswers = 0
    /// Registrations left unanswered because the per-source or total rate of unsealed answers
    /// was reached (each is counted in `refusedRegistrations` or `refusedForLimits` too).
    public private(set) var unansweredRegistrations = 0
    /// Registrations evicted from the heaviest network to make room for a lighter one.
    public private(set) var evictedEntries = 0
    /// Tags evicted from the heaviest network to make room for a lighter one.
    public private(set) var evictedTags = 0
    /// Binding requests answered so far.
    public private(set) var bindingAnswers = 0
    /// TURN credentials answers sent so far (with servers, or none when there is no offer).
    public private(set) var credentialsIssued = 0
    /// TURN credentials requests refused by a rate limit (each counted in `refusedForLimits` too).
    public private(set) var credentialsRefused = 0
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
    /// Registrations held from the network (IPv4 /24, IPv6 /56) of `address`. Main actor; O(1).
    package func entries(inNetworkOf address: SocketAddress) -> Int { entryLoad[address.prefixKey] }
    /// Registrations held from the wide network (IPv4 /16, IPv6 /48) of `address`. Main actor; O(1).
    package func entries(inWideNetworkOf address: SocketAddress) -> Int { entryWideLoad[address.widePrefixKey] }
    /// Tags held by the registrations of the wide network of `address`. Main actor; O(1).
    package func tags(inWideNetworkOf address: SocketAddress) -> Int { tagWideLoad[address.widePrefixKey] }
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

    /// A node serving on `socket` (started here) on `scheduler`'s clock, with `limits`: tests run
    /// one on a simulated network.
    package init(socket s: any DatagramPort, scheduler: any TaskScheduler, limits: Limits = Limits()) {
        socket = s
        self.scheduler = scheduler
        self.limits = limits
        let start = scheduler.now
        (entryLoad, entryWideLoad, tagLoad, tagWideLoad) = Self.loads(limits)
        (binding, cookieAnswerLimiter, credentialLimiter) = Self.limiters(limits, now: start)
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
        limits = Limits()
        let start = scheduler.now
        (entryLoad, entryWideLoad, tagLoad, tagWideLoad) = Self.loads(limits)
        (binding, cookieAnswerLimiter, credentialLimiter) = Self.limiters(limits, now: start)
        cookieSecretAt = start
        lastSweep = start
    }

    /// Empty per-network counts for `limits`.
    private static func loads(_ limits: Limits) -> (NetworkLoad, NetworkLoad, NetworkLoad, NetworkLoad) {
        (
            NetworkLoad(smallShare: limits.smallNetworkEntries), NetworkLoad(smallShare: limits.smallNetworkEntries),
            NetworkLoad(smallShare: limits.smallNetworkTags), NetworkLoad(smallShare: limits.smallNetworkTags)
        )
    }

    /// Full Binding, unsealed-answer and credentials buckets at `now`.
    private static func limiters(_ limits: Limits, now: MonotonicTime) -> (RateLimiter, RateLimiter, RateLimiter) {
        (
            RateLimiter(
                rate: bindingRate, burst: bindingBurst, ratePerSource: bindingRatePerSource,
                burstPerSource: bindingBurstPerSource, maxSources: maxBindingSources, now: now),
            RateLimiter(
                rate: limits.cookieAnswerRate, burst: limits.cookieAnswerBurst,
                ratePerSource: limits.cookieAnswerRatePerSource, burstPerSource: limits.cookieAnswerBurstPerSource,
                maxSources: limits.maxCookieAnswerSources, now: now),
            RateLimiter(
                rate: limits.credentialRate, burst: limits.credentialRateBurst,
                ratePerSource: limits.credentialRatePerNetwork, burstPerSource: limits.credentialBurstPerNetwork,
                maxSources: limits.maxCredentialNetworks, now: now)
        )
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

    /// Removes expired registrations and tags and idle rate buckets; rotates the cookie secret
    /// every two minutes. O(entries + tags), at most once a second.
    private func sweep(now: MonotonicTime) {
        guard now - lastSweep >= .seconds(1) else { return }
        lastSweep = now
        if now - cookieSecretAt >= .seconds(120) {
            previousCookieSecret = cookieSecret
            cookieSecret = Sodium.randomSecret(32)
            cookieSecretAt = now
        }
        let expiry = expiryDuration
        let expired = entries.filter { now - $0.value.lastSeen > expiry }.keys
        for key in expired { removeEntry(key) }
        sweptEntries += expired.count
        // Tags not registered again within the expiry go.
        for (key, e) in entries {
            let stale = e.tags.filter { now - $0.value > expiry }.keys
            for tag in stale { removeTag(tag, of: key) }
        }
        sourceTokens = sourceTokens.filter { (now - $0.value.at).inSeconds < Self.keyBurst / Self.keyRate }
        binding.sweep(now: now)
        cookieAnswerLimiter.sweep(now: now)
        credentialLimiter.sweep(now: now)
    }

    // MARK: Holding and releasing

    /// Counts entry `key` at `endpoint` in (or, `sign` -1, out of) its networks.
    private func load(_ key: [UInt8], at endpoint: SocketAddress, _ sign: Int) {
        entryLoad.add(endpoint.prefixKey, sign)
        entryWideLoad.add(endpoint.widePrefixKey, sign)
        if sign > 0 {
            members[endpoint.widePrefixKey, default: ArrivalOrder()].append(key)
        } else {
            members[endpoint.widePrefixKey]?.remove(key)
            if members[endpoint.widePrefixKey]?.isEmpty == true { members[endpoint.widePrefixKey] = nil }
        }
    }

    /// Forgets entry `key` with its tags. O(its tags).
    private func removeEntry(_ key: [UInt8]) {
        guard let e = entries[key] else { return }
        for tag in e.tags.keys { removeTag(tag, of: key) }
        entries[key] = nil
        load(key, at: e.endpoint, -1)
    }

    /// Takes `tag` from entry `key` (which holds it). O(1).
    private func removeTag(_ tag: [UInt8], of key: [UInt8]) {
        guard let endpoint = entries[key]?.endpoint, entries[key]?.tags.removeValue(forKey: tag) != nil else { return }
        if tagOwners[tag] == key { tagOwners[tag] = nil }
        tagLoad.add(endpoint.prefixKey, -1)
        tagWideLoad.add(endpoint.widePrefixKey, -1)
    }

    /// Whether one more registration from `address`'s networks fits, evicting from the heaviest
    /// wide network when the node (or the bulk share, for a network past its small share) is full
    /// and that network holds more than `address`'s would. The registration asked about is not
    /// counted anywhere yet. O(1) amortised.
    private func admitsEntry(from address: SocketAddress) -> Bool {
        let narrow = address.prefixKey, wide = address.widePrefixKey
        guard entryLoad[narrow] < limits.maxEntriesPerPrefix, entryWideLoad[wide] < limits.maxEntriesPerWidePrefix else {
            return false
        }
        let isBulk = entryWideLoad[wide] >= limits.smallNetworkEntries
        while entryWideLoad.total >= limits.maxEntries
            || (isBulk && entryWideLoad.bulk >= limits.maxEntries - limits.reservedEntries)
        {
            guard let heaviest = entryWideLoad.heaviest, entryWideLoad[heaviest] > entryWideLoad[wide] + 1,
                let victim = members[heaviest]?.first
            else { return false }
            removeEntry(victim)
            evictedEntries += 1
        }
        return true
    }

    /// Whether one more tag held from `address`'s networks fits (`adds`: it is not held by anyone
    /// yet, so the total grows), evicting a tag of the heaviest wide network when the node (or the
    /// bulk share) is full and that network holds more than `address`'s would. O(1) amortised,
    /// plus a scan of the heaviest network's registrations for one with tags.
    private func admitsTag(from address: SocketAddress, adds: Bool) -> Bool {
        let narrow = address.prefixKey, wide = address.widePrefixKey
        guard tagLoad[narrow] < limits.maxTagsPerPrefix, tagWideLoad[wide] < limits.maxTagsPerWidePrefix else {
            return false
        }
        let isBulk = tagWideLoad[wide] >= limits.smallNetworkTags
        while (adds && tagOwners.count >= limits.maxTags)
            || (isBulk && tagWideLoad.bulk >= limits.maxTags - limits.reservedTags)
        {
            guard let heaviest = tagWideLoad.heaviest, tagWideLoad[heaviest] > tagWideLoad[wide] + 1,
                let victim = members[heaviest]?.first(where: { entries[$0]?.tags.isEmpty == false }),
                let tag = entries[victim]?.tags.keys.min(by: { $0.lexicographicallyPrecedes($1) })
            else { return false }
            removeTag(tag, of: victim)
            evictedTags += 1
        }
        return true
    }

    // MARK: Datagrams

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
        guard binding.take(from.sourceKey, now: now) else {
            refusedForLimits += 1
            return
        }
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
        switch type {
        case .rendezvousRegister:
            guard bytes.count >= RendezvousAuth.registerLength,
                bytes.count <= RendezvousAuth.registerLength + 16 * RendezvousAuth.maxTagsPerRegistration,
                (bytes.count - RendezvousAuth.registerLength) % 16 == 0, let key = r.take(32),
                let timestamp = r.u64(), let cookie = r.take(16)
            else { droppedPackets += 1; return }
            let answer = register(bytes, key: key, timestamp: timestamp, cookie: cookie, from: from, now: now)
            sendAnswer(answer, key: key, timestamp: timestamp, to: from, now: now)
        case .rendezvousLookup:
            lookup(bytes, reader: r, from: from, now: now)
        case .relaySend:
            relay(bytes, reader: r, from: from, now: now)
        case .turnCredentialsRequest:
            answerCredentials(bytes, reader: r, from: from, now: now)
        default:
            droppedPackets += 1
        }
    }

    /// Sends a registration's answer (docs/session.md, 0x59): sealed under the registration's MAC
    /// key with the spent timestamp as nonce, or unsealed within the per-source and total rate.
    private func sendAnswer(_ answer: Answer, key: [UInt8], timestamp: UInt64, to: SocketAddress, now: MonotonicTime) {
        let cookie = self.cookie(for: to, secret: cookieSecret)
        var w = ByteWriter(capacity: RendezvousAuth.registeredLength)
        w.u8(PacketType.rendezvousRegistered.rawValue)
        w.u8(revueProtocolVersion)
        switch answer {
        case .sealed(let accepted, let macKey):
            let nonce = timestamp | RendezvousAuth.registeredNonceBits
            w.u8(RendezvousAuth.registeredSealed)
            w.u64(nonce)
            var plain = ByteWriter(capacity: 33)
            plain.u8(accepted ? 1 : 0)
            plain.append(cookie)
            plain.append(accepted ? entries[key]?.token ?? [UInt8](repeating: 0, count: 16) : [UInt8](repeating: 0, count: 16))
            w.append(Sodium.seal(key: macKey, nonce: nonce, ad: w.bytes, plaintext: plain.bytes))
        case .unsealed:
            guard cookieAnswerLimiter.take(to.sourceKey, now: now) else {
                unansweredRegistrations += 1
                return
            }
            cookieAnswers += 1
            w.u8(RendezvousAuth.registeredUnsealed)
            w.append(identity.publicKey)
            w.append(cookie)
        }
        send(w.bytes, to: to)
    }

    /// Checks and stores one registration; what to answer. A key the node holds costs one AEAD
    /// open whatever the cookie (so a peer that moved gets a sealed cookie for its new endpoint);
    /// an unknown key needs the cookie, then an X25519 within the source's rate. The tags it carries
    /// are added to (or refresh) the registration's, within the caps; a tag another key holds
    /// moves to this one when it comes from the holder's IP address or the holder stopped
    /// registering it (`tagTakeoverAge`).
    private func register(
        _ bytes: [UInt8], key: [UInt8], timestamp: UInt64, cookie: [UInt8], from: SocketAddress, now: MonotonicTime
    ) -> Answer {
        // The cookie (one BLAKE2b): a spoofed source never saw it.
        let cookieValid =
            Sodium.equal(cookie, self.cookie(for: from, secret: cookieSecret))
            || Sodium.equal(cookie, self.cookie(for: from, secret: previousCookieSecret))
        // Timestamps at or above 2^62 would make the nonce of a sealed answer ambiguous.
        guard timestamp >> 62 == 0 else {
            refusedRegistrations += 1
            return .unsealed
        }
        let header = Array(bytes[0..<RendezvousAuth.registerHeaderLength])
        let sealed = bytes[RendezvousAuth.registerHeaderLength...]
        if var e = entries[key] {
            guard timestamp > e.timestamp,
                let plain = Sodium.open(key: e.macKey, nonce: timestamp, ad: header, ciphertext: sealed),
                let status = plain.first, (plain.count - 1) % 16 == 0
            else {
                refusedRegistrations += 1
                return .unsealed
            }
            openedTap?(plain)
            // Spent: the answer's nonce is made of it, so it is never answered again.
            e.timestamp = timestamp
            guard cookieValid else {
                entries[key] = e
                refusedRegistrations += 1
                return .sealed(accepted: false, macKey: e.macKey)
            }
            if e.endpoint != from {
                guard move(key, &e, to: from) else {
                    entries[key] = e
                    refusedForLimits += 1
                    return .sealed(accepted: false, macKey: e.macKey)
                }
            }
            e.status = status
            e.lastSeen = now
            addTags(plain, to: &e, key: key, from: from, now: now)
            entries[key] = e
            return .sealed(accepted: true, macKey: e.macKey)
        }
        guard cookieValid else {
            refusedRegistrations += 1
            return .unsealed
        }
        guard sourceTokens.count < Self.maxSources || sourceTokens[from.sourceKey] != nil else {
            refusedForLimits += 1
            return .unsealed
        }
        var bucket = sourceTokens[from.sourceKey] ?? TokenBucket(burst: Self.keyBurst, now: now)
        let allowed = bucket.take(now: now, rate: Self.keyRate, burst: Self.keyBurst)
        sourceTokens[from.sourceKey] = bucket
        guard allowed else {
            refusedForLimits += 1
            return .unsealed
        }
        keyAgreements += 1
        guard let macKey = RendezvousAuth.heldKey(secret: identity.secret, peerPublic: key),
            let plain = Sodium.open(key: macKey, nonce: timestamp, ad: header, ciphertext: sealed),
            let status = plain.first, (plain.count - 1) % 16 == 0
        else {
            refusedRegistrations += 1
            return .unsealed
        }
        openedTap?(plain)
        // Refused here, nothing holds its timestamp: the answer stays unsealed.
        guard admitsEntry(from: from) else {
            refusedForLimits += 1
            return .unsealed
        }
        var e = Entry(
            endpoint: from, status: status, lastSeen: now, timestamp: timestamp, macKey: macKey,
            token: RandomBytes.bytes(16), relay: TokenBucket(burst: Self.relayBurst, now: now),
            lookups: TokenBucket(burst: limits.lookupBurst, now: now), credentialsNonce: timestamp,
            credentials: TokenBucket(burst: limits.credentialBurst, now: now))
        entries[key] = e
        load(key, at: from, 1)
        addTags(plain, to: &e, key: key, from: from, now: now)
        entries[key] = e
        return .sealed(accepted: true, macKey: macKey)
    }

    /// Moves entry `key` (held as `e`) to `to`, with a new relay token, when `to`'s networks
    /// admit it as they would a new registration (evicting from the heaviest when full); a move
    /// to another network releases its tags, which the registration that moved it carries again
    /// (through the tag caps of the new network). False, and nothing changed, when refused.
    private func move(_ key: [UInt8], _ e: inout Entry, to: SocketAddress) -> Bool {
        let old = e.endpoint
        if old.prefixKey != to.prefixKey || old.widePrefixKey != to.widePrefixKey {
            load(key, at: old, -1)
            guard admitsEntry(from: to) else {
                load(key, at: old, 1)
                return false
            }
            entries[key] = e
            for tag in e.tags.keys { removeTag(tag, of: key) }
            e.tags = [:]
            load(key, at: to, 1)
        }
        e.endpoint = to
        e.token = RandomBytes.bytes(16)
        return true
    }

    /// Adds the tags of an opened registration (`plain`: status, then tags) to entry `key`
    /// (`e`, at `from`), or refreshes them, within the caps.
    private func addTags(_ plain: [UInt8], to e: inout Entry, key: [UInt8], from: SocketAddress, now: MonotonicTime) {
        var i = 1
        while i + 16 <= plain.count {
            let tag = Array(plain[i..<(i + 16)])
            i += 16
            if e.tags[tag] != nil {
                e.tags[tag] = now
                continue
            }
            guard e.tags.count < limits.maxTagsPerEntry else {
                refusedForLimits += 1
                continue
            }
            let owner = tagOwners[tag]
            if let owner, owner != key, let held = entries[owner] {
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
            }
            guard admitsTag(from: from, adds: tagOwners[tag] == nil) else {
                refusedForLimits += 1
                continue
            }
            if let holder = tagOwners[tag] { removeTag(tag, of: holder) }
            tagOwners[tag] = key
            e.tags[tag] = now
            tagLoad.add(from.prefixKey, 1)
            tagWideLoad.add(from.widePrefixKey, 1)
        }
    }

    /// Answers a lookup from a registered endpoint (docs/session.md, 0x5A/0x5B): sealed under the
    /// asker's key with its nonce plus 2^63, each nonce once, within `Limits.lookupRate`.
    private func lookup(_ bytes: [UInt8], reader: ByteReader, from: SocketAddress, now: MonotonicTime) {
        var r = reader
        let expiry = expiryDuration
        guard bytes.count == RendezvousAuth.lookupLength, let asker = r.take(32), let nonce = r.u64(), nonce >> 62 == 0,
            var a = entries[asker], a.endpoint == from, now - a.lastSeen <= expiry,
            let tag = Sodium.open(key: a.macKey, nonce: nonce, ad: Array(bytes[0..<42]), ciphertext: bytes[42...]),
            tag.count == 16
        else {
            droppedPackets += 1
            return
        }
        // A nonce answered before (a replay) is not answered again: that would seal twice under it.
        guard nonce > a.lookupNonces.min(), !any(a.lookupNonces .== SIMD4(repeating: nonce)) else {
            droppedPackets += 1
            return
        }
        for i in a.lookupNonces.indices where a.lookupNonces[i] == a.lookupNonces.min() {
            a.lookupNonces[i] = nonce
            break
        }
        let allowed = a.lookups.take(now: now, rate: limits.lookupRate, burst: limits.lookupBurst)
        entries[asker] = a
        guard allowed else {
            refusedForLimits += 1
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
    }

    /// Forwards a relay send from a registered endpoint with its token and a source tag it holds
    /// to the target tag's holder, within `relayRate`.
    private func relay(_ bytes: [UInt8], reader: ByteReader, from: SocketAddress, now: MonotonicTime) {
        var r = reader
        let expiry = expiryDuration
        guard let source = r.take(32), let token = r.take(16), let target = r.take(16), let sourceTag = r.take(16),
            r.remaining > 0,
            var s = entries[source], s.endpoint == from, now - s.lastSeen <= expiry, Sodium.equal(s.token, token),
            tagOwners[sourceTag] == source, s.tags[sourceTag] != nil,
            let owner = tagOwners[target], let e = entries[owner], now - e.lastSeen <= expiry
        else { droppedPackets += 1; return }
        let allowed = s.relay.take(now: now, rate: Self.relayRate, burst: Self.relayBurst)
        entries[source] = s
        guard allowed else {
            refusedForLimits += 1
            return
        }
        var w = ByteWriter(capacity: bytes.count)
        w.u8(PacketType.relayDeliver.rawValue)
        w.u8(revueProtocolVersion)
        w.append(sourceTag)
        w.append(r.rest())
        send(w.bytes, to: e.endpoint)
        relayedPackets += 1
    }

    // MARK: TURN credentials

    /// Answers a TURN credentials request from a registered endpoint (docs/session.md, 0x55/0x56):
    /// sealed under the registration's MAC key with the request's nonce plus 2^62, each nonce
    /// once, within the per-registration, per-network and total rates. The user name's id is a
    /// keyed hash of the registration key (stable while the peer keeps that key). One AEAD open,
    /// one BLAKE2b, one HMAC-SHA1 and one AEAD seal; nothing stored but the nonce and the bucket.
    private func answerCredentials(_ bytes: [UInt8], reader: ByteReader, from: SocketAddress, now: MonotonicTime) {
        var r = reader
        let expiry = expiryDuration
        let headerLength = RendezvousAuth.credentialsRequestLength - RendezvousAuth.credentialsPaddingLength - 16
        guard bytes.count == RendezvousAuth.credentialsRequestLength, let key = r.take(32), let nonce = r.u64(),
            nonce >> 62 == 0, var e = entries[key], e.endpoint == from, now - e.lastSeen <= expiry, nonce > e.credentialsNonce,
            Sodium.open(key: e.macKey, nonce: nonce, ad: Array(bytes[0..<headerLength]), ciphertext: bytes[headerLength...])
                != nil
        else {
            droppedPackets += 1
            return
        }
        // Spent: the answer's nonce is made of it.
        e.credentialsNonce = nonce
        let lifetime = turnOffer?.lifetime ?? TURNOffer.defaultLifetime
        let allowed = e.credentials.take(
            now: now, rate: limits.credentialRequestsPerLifetime / Double(lifetime), burst: limits.credentialBurst)
        entries[key] = e
        guard allowed, credentialLimiter.take(from.prefixKey, now: now) else {
            refusedForLimits += 1
            credentialsRefused += 1
            return
        }
        let plain: [UInt8]
        if let offer = turnOffer {
            let id = Hex.encode(Sodium.keyedBlake2b(key: turnIdSecret, key, outputLength: 8)).lowercased()
            let expiresAt = UInt64(max(0, wallClock())) + UInt64(lifetime)
            let credentials = TURNCredentials.make(secret: offer.secret, id: id, expiry: expiresAt)
            plain = TURNCredentialsWire.plaintext(validFor: lifetime, credentials: credentials, servers: offer.servers)
        } else {
            plain = TURNCredentialsWire.plaintext(validFor: lifetime, credentials: nil, servers: [])
        }
        let answerNonce = nonce | RendezvousAuth.credentialsNonceBit
        var w = ByteWriter(capacity: RendezvousAuth.maxCredentialsLength)
        w.u8(PacketType.turnCredentials.rawValue)
        w.u8(revueProtocolVersion)
        w.u64(answerNonce)
        w.append(Sodium.seal(key: e.macKey, nonce: answerNonce, ad: w.bytes, plaintext: plain))
        credentialsIssued += 1
        send(w.bytes, to: from)
    }
}

/// Keys in the order they arrived, with O(1) append, removal and oldest: a doubly linked list
/// threaded through a dictionary. The rendezvous node keeps one per wide network so that eviction
/// takes the oldest registration rather than whichever a `Set` yields first (that order changes
/// with the process's hashing seed). Thread rule: a value, owned by the node (main actor). Cost:
/// one dictionary entry per key.
struct ArrivalOrder<Key: Hashable> {
    private var links: [Key: (previous: Key?, next: Key?)] = [:]
    /// The oldest key (nil when empty).
    private(set) var first: Key?
    private var last: Key?

    /// Whether no key is held.
    var isEmpty: Bool { links.isEmpty }

    /// Adds `key` as the newest; a key already held keeps its place.
    mutating func append(_ key: Key) {
        guard links[key] == nil else { return }
        links[key] = (previous: last, next: nil)
        if let last { links[last]?.next = key } else { first = key }
        last = key
    }

    /// Removes `key` if held.
    mutating func remove(_ key: Key) {
        guard let link = links.removeValue(forKey: key) else { return }
        if let previous = link.previous { links[previous]?.next = link.next } else { first = link.next }
        if let next = link.next { links[next]?.previous = link.previous } else { last = link.previous }
    }

    /// The oldest key that satisfies `predicate`, walking from the oldest. O(keys visited).
    func first(where predicate: (Key) -> Bool) -> Key? {
        var cursor = first
        while let key = cursor {
            if predicate(key) { return key }
            cursor = links[key]?.next
        }
        return nil
    }
}
