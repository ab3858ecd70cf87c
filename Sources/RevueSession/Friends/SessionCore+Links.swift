// Friend links (`FriendLink`): made when a friend connects, announced in `link` frames until the
// friend has all of it, kept by its ICE agent, closed a while after the friend went offline.
// docs/session.md "One path per friend".
import Dispatch
internal import MediaCore

extension SessionCore {
    /// The friend's link, made and started when missing (nil when links are off or its socket
    /// cannot be bound; the session then keeps to its own socket). Main actor.
    func ensureLink(_ f: FriendState) -> FriendLink? {
        if let link = f.link { return link }
        guard environment.makesLinks else { return nil }
        // One side of each pair controls (RFC 8445 §6.1.1): the one with the smaller ID, as in calls.
        var ice = ICEAgentConfiguration(controlling: ownId < f.id)
        ice.servers = callICEServers
        let id = f.id
        let endpoint: FriendLinkEndpoint
        do {
            endpoint = try environment.makeLinkEndpoint(configuration.bindHost, ice)
        } catch {
            counters.linkFailures += 1
            return nil
        }
        let toMainActor = endpoint.toMainActor
        let link = FriendLink(endpoint: endpoint) { [weak self] bytes in
            toMainActor { MainActor.assumeIsolated { self?.handleLinkDatagram(bytes, friendId: id) } }
        }
        f.link = link
        link.start(
            onCandidate: { [weak self] in
                guard let self, let f = friends[id] else { return }
                announceLink(f, now: scheduler.now)
            },
            onPathChange: { [weak self] in
                guard let self, let f = friends[id] else { return }
                let now = scheduler.now
                // A ping on the new pair at once: its pong moves the session onto it.
                if f.isConnected, f.link?.route != nil, !environment.faults.dropDirectSends {
                    sendPing(f, route: .link, now: now)
                }
                updatePaths(f, now: now)
                linkRouteChanged?(id)
            })
        announceLink(f, now: scheduler.now)
        return link
    }

    /// Every tick: announces again while the friend lacks part of our link (at most every
    /// `linkAnnounceInterval`), and closes the link of a friend offline for `FriendLink.idleLifetime`
    /// unless a call leg still uses it.
    func tickLink(_ f: FriendState, now: MonotonicTime) {
        guard let link = f.link else {
            if f.isConnected { _ = ensureLink(f) }
            return
        }
        if f.isConnected {
            link.offlineSince = nil
            if link.peerIsBehind, now.since(link.lastAnnounce) >= Self.linkAnnounceInterval { announceLink(f, now: now) }
        } else {
            let since = link.offlineSince ?? now
            link.offlineSince = since
            if now - since >= FriendLink.idleLifetime, !link.isLent { closeLink(f) }
        }
    }

    /// Sends our `link` frame to a connected friend (on its best route).
    func announceLink(_ f: FriendState, now: MonotonicTime) {
        guard f.isConnected, let link = f.link else { return }
        link.lastAnnounce = now
        sendFrame(f, link.announcement())
    }

    /// A friend's `link` frame: its credentials (new ones replace the old, an ICE restart on its
    /// side), the candidates not taken yet (at most `FriendLink.maxCandidates` in all), and what
    /// it knows of ours: when that is behind, we announce again at once. Malformed: dropped and counted.
    func handleLinkFrame(_ f: FriendState, _ r: inout ByteReader, now: MonotonicTime) {
        guard let ufrag = r.shortString(), let password = r.shortString(), let known = r.shortString(),
            let knownCount = r.u8(), let count = r.u8(), (4...256).contains(ufrag.utf8.count),
            (22...256).contains(password.utf8.count)
        else {
            counters.droppedMalformed += 1
            return
        }
        var texts: [String] = []
        for _ in 0..<count {
            guard let t = r.shortString() else {
                counters.droppedMalformed += 1
                return
            }
            texts.append(t)
        }
        guard let link = ensureLink(f) else { return }
        if link.remoteUfrag != ufrag {
            link.remoteUfrag = ufrag
            link.remoteCandidates = []
            link.agent.setRemoteCredentials(ufrag: ufrag, password: password)
        }
        // Every text counts as taken, parsed or not, so what we report matches what was sent.
        for t in texts where link.remoteCandidates.count < FriendLink.maxCandidates && !link.remoteCandidates.contains(t) {
            link.remoteCandidates.insert(t)
            if let c = ICECandidate(sdpValue: t) { link.agent.addRemoteCandidate(c) }
        }
        link.peerKnows = (known, Int(knownCount))
        // An answer at once, but not faster than one per `linkAnswerGap` (the tick repeats it).
        if link.peerIsBehind, now.since(link.lastAnnounce) >= Self.linkAnswerGap { announceLink(f, now: now) }
    }

    /// Closes a friend's link (deleted, or offline too long); its next connection makes a new one.
    func closeLink(_ f: FriendState) {
        f.link?.close()
        f.link = nil
        f.routes[.link] = nil
    }
}
