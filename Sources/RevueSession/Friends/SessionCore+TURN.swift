// TURN credentials from rendezvous nodes: a registered peer asks each node it is registered at
// for coturn shared-secret credentials (docs/session.md, 0x55/0x56), renews them halfway through
// their life, and adds the servers to what call media gathers from, after any the App configured.
// docs/turn.md, "Deployment".
internal import MediaCore

extension SessionCore {
    /// The first wait before asking a node for credentials again when it did not answer.
    nonisolated static let credentialsMinBackoff = Duration.seconds(2)
    /// The longest such wait.
    static let credentialsMaxBackoff = Duration.seconds(60)
    /// Open credentials requests kept per node.
    static let maxPendingCredentials = 8

    /// Asks `node` for TURN credentials when we hold none from it, or they are halfway through
    /// their life, and the node accepted our current registration key lately; at most once per
    /// backoff (2 s, doubled while unanswered, up to 60 s). The request is sealed under the
    /// registration's MAC key, its nonce from the lookup clock, padded so the answer is never
    /// larger. Main actor; one AEAD seal when due, nothing otherwise.
    func requestCredentialsIfDue(from node: SocketAddress, now: MonotonicTime) {
        guard var state = nodeStates[node], let macKey = state.macKey,
            state.tokenKey == state.registrationKeys.publicKey,
            let last = lastRegistered[node], now - last <= timeouts.rendezvousInterval * 3 + .milliseconds(500)
        else { return }
        if let grant = state.turnGrant, now < grant.renewAt { return }
        if let next = state.nextCredentialsRequest, now < next { return }
        let nonce = nextTimestamp() & ~RendezvousAuth.registeredNonceBits
        var w = ByteWriter(capacity: RendezvousAuth.credentialsRequestLength)
        w.u8(PacketType.turnCredentialsRequest.rawValue)
        w.u8(revueProtocolVersion)
        w.append(state.registrationKeys.publicKey)
        w.u64(nonce)
        w.append(
            Sodium.seal(
                key: macKey, nonce: nonce, ad: w.bytes,
                plaintext: [UInt8](repeating: 0, count: RendezvousAuth.credentialsPaddingLength)))
        state.pendingCredentials.append((nonce, macKey))
        if state.pendingCredentials.count > Self.maxPendingCredentials { state.pendingCredentials.removeFirst() }
        state.nextCredentialsRequest = now + state.credentialsBackoff
        state.credentialsBackoff = min(state.credentialsBackoff * 2, Self.credentialsMaxBackoff)
        nodeStates[node] = state
        counters.turnCredentialsRequested += 1
        environment.sendTap?(w.bytes, .direct(node))
        socket.send(w.bytes, to: node)
    }

    /// A node's TURN credentials answer: believed only from a node we use, naming one of our open
    /// requests and opening under the MAC key it was sealed with (else counted as forged). The
    /// servers it names, with the credentials, replace what that node gave before; they are used
    /// until their life ends and asked for again halfway. Friend links already running start an
    /// allocation on each server they do not use yet. Main actor; one AEAD open.
    func handleCredentials(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from), bytes.count <= RendezvousAuth.maxCredentialsLength, r.u8() == revueProtocolVersion,
            let nonce = r.u64()
        else {
            counters.droppedMalformed += 1
            return
        }
        let bit = RendezvousAuth.credentialsNonceBit
        guard var state = nodeStates[from], nonce >> 62 == 1,
            let open = state.pendingCredentials.firstIndex(where: { $0.nonce == nonce & ~bit }),
            let plain = Sodium.open(
                key: state.pendingCredentials[open].macKey, nonce: nonce, ad: Array(bytes[0..<10]), ciphertext: bytes[10...])
        else {
            counters.droppedForged += 1
            return
        }
        state.pendingCredentials.remove(at: open)
        guard let (validFor, servers) = TURNCredentialsWire.parse(plain) else {
            nodeStates[from] = state
            counters.droppedMalformed += 1
            return
        }
        let now = scheduler.now
        let life = Duration.seconds(Int(max(2, validFor)))
        // The node counted the life from its clock before sending: a second less is safe.
        state.turnGrant = TURNGrant(servers: servers, expiresAt: now + life - .seconds(1), renewAt: now + life / 2)
        state.nextCredentialsRequest = nil
        state.credentialsBackoff = Self.credentialsMinBackoff
        nodeStates[from] = state
        counters.turnCredentialsReceived += 1
        guard !servers.isEmpty else { return }
        for id in friendOrder {
            if let link = friends[id]?.link { link.agent.addServers(servers) }
        }
    }

    /// TURN servers with credentials from the rendezvous nodes that are still valid, in the order
    /// of `rendezvousNodes`. Main actor; O(nodes).
    var grantedTURNServers: [ICEServer] {
        let now = scheduler.now
        return rendezvousNodes.flatMap { node -> [ICEServer] in
            guard let grant = nodeStates[node]?.turnGrant, now < grant.expiresAt else { return [] }
            return grant.servers
        }
    }

    /// What a call leg's ICE agent gathers from: the App's servers and the rendezvous nodes as
    /// STUN servers (`RevueConfiguration.resolvedICEServers`), then the TURN servers the nodes
    /// handed credentials for, except one the App names itself (same address and transport: the
    /// App's comes first and wins). Main actor; may block on `getaddrinfo` for configured names.
    var callICEServers: [ICEServer] {
        var out = configuration.resolvedICEServers
        for s in grantedTURNServers
        where !out.contains(where: { $0.kind == .turn && $0.address == s.address && $0.transport == s.transport }) {
            out.append(s)
        }
        return out
    }
}
