import Dispatch
import Foundation
import MediaCore
import RevueSession

extension FuzzEntries {
    /// A rendezvous node's `handle` (docs/session.md, Rendezvous nodes) driven by a sequence of
    /// actions (`[length: UInt16 BE][op][bytes]` records) against a fresh socketless node per input.
    /// Three fixed clients at 127.0.0.1:50001-50003 learn the node's key, cookies and relay tokens
    /// from its answers (seen through `sendTap`), so actions can be correct (a registration with
    /// the right cookie and MAC, a MAC'd lookup, a relay send with the token) or hostile (any
    /// bytes from any source, a client's datagram replayed from another client's address).
    ///
    /// Properties checked after every datagram, against what the harness knows independently:
    /// - no amplification: the node's answers to one datagram total no more bytes than it;
    /// - a registration is accepted only for one of the clients (nobody else holds a key it can
    ///   seal for), from an endpoint the node had given the cookie it carries;
    /// - a sealed registration answer goes only to a client's registration, opens under that
    ///   client's key with the registration's timestamp (plus 3 x 2^62) as nonce, and no nonce
    ///   seals two answers; an unsealed one carries only the node key and a cookie;
    /// - a lookup is answered only to a client, sealed under that client's key with the lookup's
    ///   nonce (top bit set), for the tag asked, and "found" names exactly the endpoint of the
    ///   client whose accepted registration carried that tag last;
    /// - a relayed datagram is delivered only for a relay send carrying a token the node handed
    ///   to that source key at that source endpoint and a source tag that key registered last,
    ///   only to the endpoint of the target tag's last registrant, and carries the source tag;
    /// - a STUN answer goes only to the sender of a Binding request, is the Binding success for
    ///   that transaction with a valid FINGERPRINT, and names the sender's address;
    /// - TURN credentials go only to a client's request from the endpoint its accepted
    ///   registration came from, sealed under its key with the request's nonce plus 2^62, each
    ///   nonce answered once, and coturn would accept them: the user name is an expiry and an id,
    ///   the password the HMAC-SHA1 of the name under the node's TURN secret.
    /// Thread rule: as `session` (main thread, or hops there). Cost: three X25519 per input.
    @Sendable public static func rendezvous(_ data: UnsafeRawBufferPointer) {
        let records = fuzzRecords(data, limit: 64).map { [UInt8]($0) }
        onMainActor { RendezvousHarness().run(records) }
    }
}

@MainActor
final class RendezvousHarness {
    struct Client {
        let keys: KeyPair
        let endpoint: SocketAddress
        var macKey: [UInt8]?
        var cookie = [UInt8](repeating: 0, count: 16)
        var token: [UInt8]?
        var timestamp: UInt64 = 0
    }

    static let keys = (1...3).map { KeyPair(secret: [UInt8](repeating: UInt8($0), count: 32)) }
    /// The node's TURN offer: one server, a fixed secret, and a fixed wall clock for the expiry.
    static let turnSecret = Array("rendezvous-fuzz-turn-secret".utf8)
    static let turnServer = ICEServer(
        kind: .turn, address: SocketAddress(ipv4: 10, 9, 8, 7, port: 3478), username: "", password: "")
    nonisolated static let wallClock: Double = 1_800_000_000
    let node: RendezvousNode = {
        let node = RendezvousNode(socketless: ())
        node.turnOffer = try? TURNOffer(
            servers: [RendezvousHarness.turnServer], secret: SecretKeyBytes(RendezvousHarness.turnSecret))
        node.wallClock = { RendezvousHarness.wallClock }
        return node
    }()
    var clients = (0..<3).map { Client(keys: RendezvousHarness.keys[$0], endpoint: .loopbackIPv4(port: UInt16(50_001 + $0))) }
    var nodeKey: [UInt8]?
    /// Cookies the node sent, per endpoint; tokens per (key, endpoint); accepted endpoints per key.
    var cookiesGiven: [SocketAddress: [[UInt8]]] = [:]
    var tokens: [[UInt8]: (token: [UInt8], endpoint: SocketAddress)] = [:]
    var registered: [[UInt8]: SocketAddress] = [:]
    /// Tag -> the client key whose accepted registration carried it last.
    var tagOwners: [[UInt8]: [UInt8]] = [:]
    /// The tag each client registers (and, on request, another client's: tags move).
    static let tags = (1...3).map { [UInt8](repeating: UInt8($0) &* 17, count: 16) }
    var sent: [([UInt8], SocketAddress)] = []
    var history: [[UInt8]] = []
    var lookupNonce: UInt64 = 0
    /// Client index and nonce of each sealed registration answer seen: a nonce seals one only.
    var sealedNonces: Set<[UInt64]> = []
    /// The last credentials request nonce of each client, and the answer nonces seen per client.
    var credentialsNonces = [UInt64](repeating: 0, count: 3)
    var credentialsAnswered: Set<[UInt64]> = []

    func run(_ records: [[UInt8]]) {
        node.sendTap = { [unowned self] bytes, to in sent.append((bytes, to)) }
        for record in records {
            guard let op = record.first else { continue }
            let rest = Array(record.dropFirst())
            let c = Int(rest.first ?? 0) % 3, d = Int(rest.dropFirst().first ?? 1) % 3
            switch op % 6 {
            case 0:
                let sources = clients.map(\.endpoint) + [.loopbackIPv4(port: 9), SocketAddress(ipv4: 10, 1, 2, 3, port: 4000)]
                deliver(Array(rest.dropFirst()), from: sources[Int(rest.first ?? 0) % sources.count])
            case 1:
                clients[c].timestamp += 1
                var w = ByteWriter()
                w.u8(PacketType.rendezvousRegister.rawValue); w.u8(revueProtocolVersion)
                w.append(clients[c].keys.publicKey); w.u64(clients[c].timestamp)
                w.append(clients[c].cookie)
                let flags = rest.dropFirst().first ?? 1
                var plain = [flags] + Self.tags[c]
                if flags & 0x80 != 0 { plain += Self.tags[d] }
                if let k = clients[c].macKey {
                    w.append(Sodium.seal(key: k, nonce: clients[c].timestamp, ad: w.bytes, plaintext: plain))
                } else {
                    w.append([UInt8](repeating: 0, count: 17))
                }
                deliver(w.bytes, from: clients[c].endpoint)
            case 2:
                lookupNonce += 1
                var w = ByteWriter()
                w.u8(PacketType.rendezvousLookup.rawValue); w.u8(revueProtocolVersion)
                w.append(clients[c].keys.publicKey); w.u64(lookupNonce)
                let key = clients[c].macKey ?? [UInt8](repeating: 0, count: 32)
                w.append(Sodium.seal(key: key, nonce: lookupNonce, ad: w.bytes, plaintext: Self.tags[d]))
                deliver(w.bytes, from: clients[c].endpoint)
            case 3:
                var w = ByteWriter()
                w.u8(PacketType.relaySend.rawValue); w.u8(revueProtocolVersion)
                w.append(clients[c].keys.publicKey); w.append(clients[c].token ?? [UInt8](repeating: 0, count: 16))
                w.append(Self.tags[d]); w.append(Self.tags[c]); w.append(rest.dropFirst(2))
                deliver(w.bytes, from: clients[c].endpoint)
            case 4:
                // A TURN credentials request, its nonce from the clock registrations use (the node
                // takes only nonces above the registration's); with the second byte's top bit,
                // the last nonce again.
                if (rest.dropFirst().first ?? 0) & 0x80 == 0 {
                    clients[c].timestamp += 1
                    credentialsNonces[c] = clients[c].timestamp
                }
                let nonce = credentialsNonces[c]
                var w = ByteWriter()
                w.u8(PacketType.turnCredentialsRequest.rawValue); w.u8(revueProtocolVersion)
                w.append(clients[c].keys.publicKey); w.u64(nonce)
                let key = clients[c].macKey ?? [UInt8](repeating: 0, count: 32)
                let padding = [UInt8](repeating: 0, count: RendezvousAuth.credentialsPaddingLength)
                w.append(Sodium.seal(key: key, nonce: nonce, ad: w.bytes, plaintext: padding))
                deliver(w.bytes, from: clients[c].endpoint)
            default:
                // A datagram sent before, replayed from another client's endpoint.
                guard !history.isEmpty else { continue }
                deliver(history[Int(rest.dropFirst().first ?? 0) % history.count], from: clients[c].endpoint)
            }
        }
        node.sendTap = nil
    }

    func deliver(_ bytes: [UInt8], from: SocketAddress) {
        history.append(bytes)
        sent = []
        node.handle(bytes, from: from)
        let total = sent.reduce(0) { $0 + $1.0.count }
        fuzzRequire(total <= bytes.count, "\(total) bytes answered \(bytes.count)")
        for (reply, to) in sent { check(reply, to: to, request: bytes, from: from) }
    }

    func client(at endpoint: SocketAddress) -> Int? { clients.firstIndex { $0.endpoint == endpoint } }

    func check(_ reply: [UInt8], to: SocketAddress, request: [UInt8], from: SocketAddress) {
        if let first = reply.first, STUNMessage.mayBeSTUN(firstByte: first) {
            // A STUN Binding answer: to the asker, for its transaction, naming its address.
            let answer = try? STUNMessage(parsing: reply), asked = try? STUNMessage(parsing: request)
            fuzzRequire(
                to == from && asked?.method == .binding && asked?.messageClass == .request, "a STUN answer to something else")
            fuzzRequire(
                answer?.method == .binding && answer?.messageClass == .successResponse
                    && answer?.transactionID == asked?.transactionID,
                "a STUN answer that is not the Binding success for that request")
            fuzzRequire(STUNMessage.hasValidFingerprint(reply), "a STUN answer without a valid FINGERPRINT")
            fuzzRequire(
                (try? answer?.xorAddress(STUNMessage.AttributeType.xorMappedAddress)) == from,
                "a STUN answer naming another address")
            return
        }
        var r = ByteReader(reply, offset: 2)
        switch reply.first.flatMap(PacketType.init(rawValue:)) {
        case .rendezvousRegistered:
            fuzzRequire(
                to == from && request.first == PacketType.rendezvousRegister.rawValue
                    && request.count >= RendezvousAuth.registerLength,
                "registered answer to something else")
            let registeredKey = Array(request[2..<34]), carried = Array(request[42..<58])
            var t = ByteReader(request, offset: 34)
            let timestamp = t.u64() ?? 0
            let i = clients.firstIndex { $0.keys.publicKey == registeredKey }
            let cookie: [UInt8]
            switch r.u8() {
            case RendezvousAuth.registeredUnsealed:
                guard let key = r.take(32), let c = r.take(16), r.remaining == 0 else {
                    return fuzzRequire(false, "an unsealed registered answer of the wrong length")
                }
                if nodeKey == nil {
                    nodeKey = key
                    for i in clients.indices {
                        clients[i].macKey = RendezvousAuth.key(secret: clients[i].keys.secret, peerPublic: key)
                    }
                }
                fuzzRequire(key == nodeKey, "the node key changed within a run")
                cookie = c
            case RendezvousAuth.registeredSealed:
                // Only to a client's registration (nobody else holds a key it can seal for),
                // under its key, with the nonce of that registration's timestamp.
                guard let i, let k = clients[i].macKey, let nonce = r.u64(), r.remaining == 33 + 16,
                    nonce == timestamp | RendezvousAuth.registeredNonceBits,
                    let plain = Sodium.open(key: k, nonce: nonce, ad: Array(reply[0..<11]), ciphertext: reply[11...]),
                    plain[0] <= 1
                else { return fuzzRequire(false, "a sealed registered answer its registrant cannot open") }
                fuzzRequire(sealedNonces.insert([UInt64(i), nonce]).inserted, "a registration nonce sealed twice")
                cookie = Array(plain[1..<17])
                if plain[0] == 1 {
                    let token = Array(plain[17..<33])
                    fuzzRequire(
                        cookiesGiven[from, default: []].contains(carried), "accepted without a cookie given to that endpoint")
                    tokens[registeredKey] = (token, from)
                    registered[registeredKey] = from
                    if clients[i].endpoint == from { clients[i].token = token }
                    // The tags it carried (the harness holds every client's key) now lead to it.
                    if let plain = Sodium.open(
                        key: k, nonce: timestamp, ad: Array(request[0..<RendezvousAuth.registerHeaderLength]),
                        ciphertext: request[RendezvousAuth.registerHeaderLength...])
                    {
                        var p = ByteReader(plain, offset: 1)
                        while let tag = p.take(16) { tagOwners[tag] = registeredKey }
                    } else {
                        fuzzRequire(false, "an accepted registration the harness cannot open")
                    }
                }
            default:
                return fuzzRequire(false, "a registered answer of another form")
            }
            cookiesGiven[to, default: []].append(cookie)
            if let i = client(at: to) { clients[i].cookie = cookie }
        case .rendezvousLookupReply:
            let i = client(at: to)
            fuzzRequire(to == from && i != nil, "a lookup answered to \(to), not a client")
            var q = ByteReader(request, offset: 34)
            guard let i, let macKey = clients[i].macKey, let nonce = r.u64(), request.count == RendezvousAuth.lookupLength,
                let asked = q.u64(), nonce == asked | 1 << 63,
                let plain = Sodium.open(key: macKey, nonce: nonce, ad: Array(reply[0..<10]), ciphertext: reply[10...])
            else {
                return fuzzRequire(false, "a lookup answer that its asker cannot open")
            }
            var p = ByteReader(plain)
            guard let tag = p.take(16), let found = p.u8(), p.u8() != nil, p.u16() != nil else {
                return fuzzRequire(false, "short lookup answer")
            }
            let endpoint = found == 1 ? p.endpoint() : nil
            fuzzRequire(p.remaining == 0 && (found == 1) == (endpoint != nil), "a lookup answer of the wrong shape")
            let askedTag = Sodium.open(key: macKey, nonce: asked, ad: Array(request[0..<42]), ciphertext: request[42...])
            fuzzRequire(askedTag == tag, "a lookup answered for another tag")
            if found == 1 {
                fuzzRequire(
                    tagOwners[tag].flatMap { registered[$0] } == endpoint,
                    "lookup named an endpoint not registered last for that tag")
            }
        case .relayDeliver:
            guard request.first == PacketType.relaySend.rawValue, request.count > 82 else {
                return fuzzRequire(false, "relay deliver without a relay send")
            }
            let source = Array(request[2..<34]), token = Array(request[34..<50]), target = Array(request[50..<66])
            let sourceTag = Array(request[66..<82])
            fuzzRequire(
                tokens[source]?.token == token && tokens[source]?.endpoint == from, "relayed without the token of that source")
            fuzzRequire(tagOwners[sourceTag] == source, "relayed under a source tag that key did not register last")
            fuzzRequire(
                tagOwners[target].flatMap { registered[$0] } == to, "relayed to an endpoint not registered for the target tag")
            fuzzRequire(r.take(16) == sourceTag, "relayed under another tag")
            fuzzRequire(Array(reply[18...]) == Array(request[82...]), "relayed another datagram")
        case .turnCredentials:
            checkCredentials(reply, to: to, request: request, from: from)
        default:
            fuzzRequire(false, "the node sent type \(reply.first ?? 0)")
        }
    }

    func checkCredentials(_ reply: [UInt8], to: SocketAddress, request: [UInt8], from: SocketAddress) {
        guard request.first == PacketType.turnCredentialsRequest.rawValue,
            request.count == RendezvousAuth.credentialsRequestLength
        else { return fuzzRequire(false, "credentials answered to something else") }
        let asker = Array(request[2..<34])
        var q = ByteReader(request, offset: 34), r = ByteReader(reply, offset: 2)
        guard to == from, let i = clients.firstIndex(where: { $0.keys.publicKey == asker }), let k = clients[i].macKey,
            let asked = q.u64(), let nonce = r.u64(), nonce == asked | RendezvousAuth.credentialsNonceBit,
            let plain = Sodium.open(key: k, nonce: nonce, ad: Array(reply[0..<10]), ciphertext: reply[10...])
        else { return fuzzRequire(false, "a credentials answer its asker cannot open") }
        fuzzRequire(registered[asker] == from, "credentials for a registration not held at that endpoint")
        fuzzRequire(credentialsAnswered.insert([UInt64(i), nonce]).inserted, "a credentials nonce answered twice")
        guard let (validFor, servers) = TURNCredentialsWire.parse(plain), let server = servers.first, servers.count == 1
        else { return fuzzRequire(false, "a credentials answer that does not parse") }
        fuzzRequire(validFor == TURNOffer.defaultLifetime && server.address == Self.turnServer.address, "other servers")
        let expected = Base64.encode(
            TURNCredentials.hmacSHA1(key: SecretKeyBytes(Self.turnSecret), Array(server.username.utf8)))
        let expiry = TURNCredentials(username: server.username, password: server.password).expiry
        fuzzRequire(
            server.password == expected && expiry == UInt64(Self.wallClock) + UInt64(validFor),
            "credentials coturn would refuse")
    }
}
