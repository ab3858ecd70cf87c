// Rooms joined by link. The host makes a link to a room on its SFU and waits there; whoever holds
// the link joins the SFU room with a join request as its display name, the host lets it in (or
// kicks it) and seals the room key of a new epoch to every participant it let in, with the
// roster, in its own display name. Each participant reads the host's display, derives every
// sender's SFrame keys from the room key and the sender's feed, and the call goes on as any call
// through the SFU: same Room API, same events in the same order. No friend channel is used: the
// SFU carries the requests and envelopes, which it cannot open. docs/security.md, "Rooms joined
// by link".
internal import MediaCore

/// The local side of a link room: our key pair and name, the link, the current epoch's room key
/// and roster, and, for the host, who it admits. Thread rule: main actor (the room's). Cost: a
/// few small collections, bounded by `RoomLinkAdmission`'s limits.
final class RoomLinkLeg {
    /// How long a joiner waits to be let in before its call fails.
    static let admissionWait = Duration.seconds(15)
    /// How long after a new epoch our senders switch to its key: participants read the host's
    /// display once a second, so a receiver may learn the key up to about two seconds after the
    /// host sealed it.
    static let keySwitchDelay = Duration.milliseconds(2500)
    /// Feeds the host remembers having refused (their requests are not weighed again).
    static let maxRefusedFeeds = 256
    /// How long after our own connection to the SFU broke a participant missing from the room's
    /// listing is not taken as gone: when the server lost the sessions, the others are making
    /// theirs again too (on new feeds) and may be back a few seconds after us.
    static let recoveryWait = Duration.seconds(10)

    let link: RoomLink
    let isHost: Bool
    let name: String
    let secret: SecretKeyBytes
    let publicKey: [UInt8]
    let startedAt: MonotonicTime
    /// What we show at the SFU as our display name: our join request, or (host) the envelope.
    var display: String
    /// The display the server last accepted from us.
    var shownDisplay: String?
    /// The host's decisions (unused by a joiner).
    var admission = RoomLinkAdmission()
    /// Feeds the host refused and asked the server to kick.
    var refused: Set<UInt64> = []
    /// The current epoch, its room key and roster (epoch 0: none yet).
    var epoch: UInt64 = 0
    /// The latest epoch whose keys our senders use (they switch `keySwitchDelay` after it).
    var epochInUse: UInt64 = 0
    var roomKey: [UInt8]?
    var roster: [RoomLinkRosterEntry] = []
    /// The host must seal a new epoch (someone came, left or was removed).
    var membershipChanged = false
    /// Breaks of our connection to the SFU seen so far (`SFUMedia.interruptions` and
    /// `rebuilds`), and when a pass first saw the last one.
    var breaksSeen = 0
    var lastBreak: MonotonicTime?

    init(link: RoomLink, isHost: Bool, name: String, secret: SecretKeyBytes, now: MonotonicTime) {
        self.link = link
        self.isHost = isHost
        self.name = name
        self.secret = secret
        publicKey = Sodium.x25519Public(secret: secret)
        startedAt = now
        display =
            isHost
            ? "revue-host"
            : RoomLinkJoinRequest.make(publicKey: publicKey, name: name, keys: RoomLinkKeys(link)) ?? ""
    }

    /// The room identity of the participant whose public key has `tag`.
    static func identity(tag: String) -> String { "link-" + tag }
}

extension Room {
    // MARK: API

    /// Makes a link to a room on the SFU of `options.sfu` that anyone holding it can join,
    /// friend or not, and waits in that room (as its host) for them. The first participant let
    /// in starts the call (`roomDidStartCall`, `participantDidConnect`); the call and every
    /// link of it end when its last participant leaves. Call it again during the same room for
    /// another link to it (at most 8 live at once). The link's text holds the room's end-to-end
    /// secret: share it only with those who may join.
    ///
    /// Throws `.notInitialized`, `.inCall` (a call with friends is going on), `.noServer`
    /// (`options.sfu` is nil or not usable), `.tooManyLinks`, or `.badName` (empty, over 64
    /// bytes, or with a control character). Thread rule: main actor. Cost: one key derivation;
    /// joining the SFU happens in the background.
    public func createLink(name: String) throws(RoomLinkError) -> RoomLink {
        guard revue.core != nil else { throw .notInitialized }
        guard RoomLinkJoinRequest.isAcceptable(name) else { throw .badName }
        if let leg = linkLeg {
            guard leg.isHost else { throw .inCall }
            guard let link = RoomLink.make(server: leg.link.server, hostKey: leg.publicKey) else { throw .noServer }
            guard leg.admission.open(RoomLinkKeys(link)) else { throw .tooManyLinks }
            return link
        }
        guard !joined, remoteParticipants.isEmpty else { throw .inCall }
        guard var server = options.sfu, server.isUsable else { throw .noServer }
        server.endToEndEncryption = true
        if server.roomSecret == nil { server.roomSecret = Base64.encodeURL(RandomBytes.bytes(18)) }
        let secret = Sodium.randomSecret(32)
        guard let link = RoomLink.make(server: server, hostKey: Sodium.x25519Public(secret: secret)) else { throw .noServer }
        let leg = RoomLinkLeg(link: link, isHost: true, name: name, secret: secret, now: now)
        leg.admission.open(RoomLinkKeys(link))
        startLinkRoom(leg, server: server)
        return link
    }

    /// Joins the room of `link` as `name`, without being a friend of anyone in it. Returns at
    /// once; once the host lets you in, the call starts as any other (`roomDidStartCall`, one
    /// `participantDidConnect` per participant, the host included). If you are not let in
    /// within 15 s (a revoked or wrong link, no host), `callDidFailWithError(.mediaSetupFailed)`
    /// follows and nothing else. `options.sfu`'s CA file, when set, is used for `https`/`wss`.
    ///
    /// Throws `.notInitialized`, `.inCall`, or `.badName`. Thread rule: main actor. Cost: one
    /// key derivation; the SFU is joined in the background.
    public func joinRoom(link: RoomLink, name: String) throws(RoomLinkError) {
        guard revue.core != nil else { throw .notInitialized }
        guard RoomLinkJoinRequest.isAcceptable(name) else { throw .badName }
        guard linkLeg == nil, !joined, remoteParticipants.isEmpty else { throw .inCall }
        var server = link.server
        server.certificateAuthorityFile = options.sfu?.certificateAuthorityFile
        let leg = RoomLinkLeg(link: link, isHost: false, name: name, secret: Sodium.randomSecret(32), now: now)
        startLinkRoom(leg, server: server)
    }

    /// Removes a participant who joined by link (host only): it leaves the call here
    /// (`participantDidDisconnect`, reason `.localHangUp`), the server drops its connections,
    /// it is refused if it comes back, and the room key changes without it, so it can read
    /// nothing sent from then on. False when you are not the host or it is not a link
    /// participant of your room. Thread rule: main actor. Cost: one request to the server.
    @discardableResult
    public func removeLinkParticipant(_ participant: RemoteParticipant) -> Bool {
        guard let leg = linkLeg, leg.isHost, let sfu, remoteParticipants[participant.identity] === participant,
            let feed = sfu.remoteFeeds[participant.identity], leg.admission.remove(feed: feed) != nil
        else { return false }
        leg.membershipChanged = true
        leg.refused.insert(feed)
        linkKick(feed, sfu)
        hangUp(participant, reason: .localHangUp, notify: false)
        sfuReconcile()
        return true
    }

    /// Revokes `link` (host only): nobody is let in by it from now on; those it let in stay
    /// until you remove them. False when it is not a live link of your room.
    /// Thread rule: main actor. Cost: none.
    @discardableResult
    public func revokeLink(_ link: RoomLink) -> Bool {
        guard let leg = linkLeg, leg.isHost else { return false }
        return leg.admission.revoke(linkID: RoomLinkKeys(link).linkID)
    }

    /// Whether `participant` joined by link (or, seen by someone who joined by link, is in a
    /// link room). Thread rule: main actor. Cost: none.
    public func isLinkParticipant(_ participant: RemoteParticipant) -> Bool {
        linkLeg != nil && participant.identity.hasPrefix("link-") && remoteParticipants[participant.identity] === participant
    }

    // MARK: Plumbing

    /// `RemoteParticipant.disconnect()`: a hang-up, or in a link room the host's removal (a
    /// joiner's hang-up with one participant would be undone by the next roster).
    func disconnectParticipant(_ p: RemoteParticipant) {
        guard let leg = linkLeg else { return hangUp(p, reason: .localHangUp, notify: true) }
        if leg.isHost { removeLinkParticipant(p) }
    }

    /// Joins the SFU room for `leg` (the host waits there; a joiner asks to be let in).
    func startLinkRoom(_ leg: RoomLinkLeg, server: SFUServer) {
        linkLeg = leg
        sfuLeg.callStarted(server: server)
        guard environment.mediaLegs, let media = SFUMedia(server: server) else { return }
        sfu = media
        sfuReconcile()
    }

    /// Whether our connection to the SFU broke less than `RoomLinkLeg.recoveryWait` ago (the
    /// first pass after a break starts the wait).
    func linkRecovering(_ leg: RoomLinkLeg, _ sfu: SFUMedia) -> Bool {
        let breaks = sfu.interruptions + sfu.rebuilds
        if breaks != leg.breaksSeen {
            leg.breaksSeen = breaks
            leg.lastBreak = now
        }
        return leg.lastBreak.map { now - $0 < RoomLinkLeg.recoveryWait } ?? false
    }

    /// The link room ended with its call (or before it began): forgotten.
    func linkRoomEnded() { linkLeg = nil }

    /// Joining the SFU room failed. A joiner that finds no room yet (Janus's 426: its host has
    /// not made it) tries again on the next pass until its wait is over; otherwise the link room
    /// fails (`linkRoomFailed`).
    func linkJoinFailed(_ sfu: SFUMedia, _ error: any Error, _ detail: String) {
        guard let leg = linkLeg else { return }
        if !leg.isHost, case JanusError.janus(426, _) = error, now - leg.startedAt < environment.linkAdmissionWait {
            sfu.failure = nil
            let session = sfu.session
            sfu.session = nil
            Task { await session?.destroy() }
            return
        }
        linkRoomFailed(detail)
    }

    /// A link room that no call began in failed (the SFU could not be joined, or a joiner was
    /// not let in): `callDidFailWithError(.mediaSetupFailed)` with no participant, and the room
    /// is left. Nothing happens once a call began (its participants were told already).
    func linkRoomFailed(_ detail: String) {
        guard linkLeg != nil, !joined else { return }
        post(
            nil, room: { $1.room($0, callDidFailWithError: .mediaSetupFailed(participant: "", detail: detail)) }, participant: nil
        )
        stopSFU()
        sfuLeg.callEnded()
        linkRoomEnded()
    }

    /// One pass of the link room, inside the SFU's convergence pass once we are in the room:
    /// reads the room's participants and acts as host or joiner.
    func linkPass(_ sfu: SFUMedia, _ handle: JanusVideoRoom) async {
        guard let leg = linkLeg, let ours = sfu.feed else { return }
        if leg.isHost, leg.display == "revue-host" { leg.membershipChanged = true }
        // Our session was made again (a new feed): the roster must say so.
        if leg.isHost, let me = leg.roster.first, me.feed != ours { leg.membershipChanged = true }
        _ = linkRecovering(leg, sfu)
        let list: [JanusParticipant]
        do { list = try await handle.listParticipants(room: sfu.server.room) } catch { return }
        guard self.sfu === sfu, !sfu.closed, linkLeg === leg else { return }
        let others = list.filter { $0.id != ours }
        if leg.isHost {
            linkHostPass(leg, sfu, others, ours: ours)
        } else {
            linkJoinerPass(leg, sfu, others, ours: ours)
        }
        guard linkLeg === leg, self.sfu === sfu, leg.display != leg.shownDisplay else { return }
        let display = leg.display
        do {
            _ = try await handle.configure(["display": .string(display)])
            leg.shownDisplay = display
        } catch {
            // Tried again on the next pass.
        }
    }

    /// The host: lets in whom a live link admits, kicks the rest, seals a new epoch when the
    /// participants changed. A member back on a new feed (its session was made again) keeps its
    /// place; one missing from the listing is gone, unless our own connection broke less than
    /// `RoomLinkLeg.recoveryWait` ago (the others may still be on their way back).
    func linkHostPass(_ leg: RoomLinkLeg, _ sfu: SFUMedia, _ others: [JanusParticipant], ours: UInt64) {
        let present = Set(others.map(\.id))
        for p in others.sorted(by: { $0.id < $1.id }) where !leg.refused.contains(p.id) {
            guard let back = leg.admission.rejoin(p.display ?? "", feed: p.id, listed: present) else { continue }
            leg.membershipChanged = true
            let id = RoomLinkLeg.identity(tag: RoomLinkRosterEntry.tag(back.member.publicKey))
            if remoteParticipants[id] != nil { sfu.remoteFeeds[id] = p.id }
        }
        let recovering = linkRecovering(leg, sfu)
        for (feed, m) in leg.admission.members where !present.contains(feed) && !recovering {
            leg.admission.left(feed: feed)
            leg.membershipChanged = true
            let id = RoomLinkLeg.identity(tag: RoomLinkRosterEntry.tag(m.publicKey))
            if let p = remoteParticipants[id] { hangUp(p, reason: .remoteHangUp, notify: false) }
            guard linkLeg === leg else { return }
        }
        var admitted: [RoomLinkAdmission.Member] = []
        for p in others.sorted(by: { $0.id < $1.id }) where !leg.refused.contains(p.id) {
            switch leg.admission.consider(p.display ?? "", feed: p.id) {
            case .admit(let m):
                admitted.append(m)
            case .refuse:
                core?.counters.callSignalsRefused += 1
                if leg.refused.count < RoomLinkLeg.maxRefusedFeeds { leg.refused.insert(p.id) }
                linkKick(p.id, sfu)
            }
        }
        let connected = Set(remoteParticipants.keys)
        if admitted.contains(where: { !connected.contains(RoomLinkLeg.identity(tag: RoomLinkRosterEntry.tag($0.publicKey))) }) {
            leg.membershipChanged = true
        }
        if leg.membershipChanged {
            leg.membershipChanged = false
            let key = RandomBytes.bytes(32)
            let members = leg.admission.members.values.sorted { $0.feed < $1.feed }
            let roster =
                [RoomLinkRosterEntry(feed: ours, tag: RoomLinkRosterEntry.tag(leg.publicKey), name: leg.name)]
                + members.map { RoomLinkRosterEntry(feed: $0.feed, tag: RoomLinkRosterEntry.tag($0.publicKey), name: $0.name) }
            guard
                let text = RoomLinkEnvelope.seal(
                    roomKey: key, epoch: leg.epoch + 1, room: sfu.server.room, hostSecret: leg.secret,
                    members: members.map(\.publicKey), roster: roster)
            else { return }
            leg.display = text
            linkApply(leg, sfu, epoch: leg.epoch + 1, roomKey: key, roster: roster, ours: ours)
        }
        linkSyncTracks(sfu)
    }

    /// A joiner: reads the host's envelope; a new epoch brings its keys and roster; no envelope
    /// for us after we had one means we were removed (or the host left), except while our own
    /// connection is recovering (`RoomLinkLeg.recoveryWait`) and no envelope is shown at all:
    /// the host's session may be on its way back.
    func linkJoinerPass(_ leg: RoomLinkLeg, _ sfu: SFUMedia, _ others: [JanusParticipant], ours: UInt64) {
        var best: (epoch: UInt64, roomKey: [UInt8], roster: [RoomLinkRosterEntry])?
        for p in others {
            guard let display = p.display,
                let opened = RoomLinkEnvelope.open(
                    display, room: sfu.server.room, hostKey: leg.link.hostKey, memberSecret: leg.secret,
                    memberPublic: leg.publicKey)
            else { continue }
            if opened.epoch > best?.epoch ?? 0 { best = opened }
        }
        guard let best else {
            if leg.epoch > 0 {
                let shown = others.contains { $0.display?.hasPrefix(RoomLinkEnvelope.prefix) == true }
                if !shown, linkRecovering(leg, sfu) { return }
                // Removed, or the host is gone: the call ends here.
                for p in remoteParticipants.values.sorted(by: { $0.identity < $1.identity }) {
                    hangUp(p, reason: .remoteHangUp, notify: false)
                }
            } else if now - leg.startedAt >= environment.linkAdmissionWait {
                linkRoomFailed("the host of the room did not let us in")
            }
            return
        }
        guard best.epoch > leg.epoch else { return linkSyncTracks(sfu) }
        linkApply(leg, sfu, epoch: best.epoch, roomKey: best.roomKey, roster: best.roster, ours: ours)
        linkSyncTracks(sfu)
    }

    /// A new epoch: every sender's keys under the room key (the last three epochs are kept:
    /// senders switch `keySwitchDelay` after an epoch, and epochs may follow faster), our senders switched once receivers have the key
    /// (`RoomLinkLeg.keySwitchDelay`), and the call's participants brought in line with the roster.
    func linkApply(
        _ leg: RoomLinkLeg, _ sfu: SFUMedia, epoch: UInt64, roomKey: [UInt8], roster: [RoomLinkRosterEntry], ours: UInt64
    ) {
        let first = leg.epoch == 0
        leg.epoch = epoch
        leg.roomKey = roomKey
        leg.roster = roster
        let ourTag = RoomLinkRosterEntry.tag(leg.publicKey)
        let others = roster.filter { $0.tag != ourTag && $0.feed != ours }
        let ids = Set(others.map { RoomLinkLeg.identity(tag: $0.tag) })
        if let frames = sfu.frames {
            for (id, kids) in sfu.remoteKeyIDs where !ids.contains(id) {
                for kid in kids { frames.removeKey(keyID: kid) }
                sfu.remoteKeyIDs[id] = nil
            }
            for e in others {
                let id = RoomLinkLeg.identity(tag: e.tag)
                let k = RoomLinkSenderKeys.keys(roomKey: roomKey, feed: e.feed)
                var held = sfu.remoteKeyIDs[id] ?? []
                guard !held.contains(k.video) else { continue }
                while held.count > 4 { frames.removeKey(keyID: held.removeFirst()) }
                guard (try? frames.addKey(keyID: k.video, baseKey: k.baseKey)) != nil,
                    (try? frames.addKey(keyID: k.audio, baseKey: k.baseKey)) != nil
                else { continue }
                held += [k.video, k.audio]
                sfu.remoteKeyIDs[id] = held
            }
            sfuBindSenders(sfu)
        }
        let mine = RoomLinkSenderKeys.keys(roomKey: roomKey, feed: ours)
        let video = sfu.video, audio = sfu.audio
        // Nothing sent yet under an older key: switch at once.
        if first || sfu.capturers.isEmpty {
            try? video?.setKey(keyID: mine.video, baseKey: mine.baseKey)
            try? audio?.setKey(keyID: mine.audio, baseKey: mine.baseKey)
            leg.epochInUse = max(leg.epochInUse, epoch)
        } else {
            let token = ObjectIdentifier(leg)
            scheduler.schedule(after: RoomLinkLeg.keySwitchDelay) { [weak self] in
                try? video?.setKey(keyID: mine.video, baseKey: mine.baseKey)
                try? audio?.setKey(keyID: mine.audio, baseKey: mine.baseKey)
                MainActor.assumeIsolated {
                    guard let leg = self?.linkLeg, ObjectIdentifier(leg) == token else { return }
                    leg.epochInUse = max(leg.epochInUse, epoch)
                }
            }
        }

        // Participants: those gone leave, those back on a new feed (their sessions were made again)
        // are followed there, newcomers connect (after their keys are in place).
        for p in remoteParticipants.values.sorted(by: { $0.identity < $1.identity }) where !ids.contains(p.identity) {
            hangUp(p, reason: .remoteHangUp, notify: false)
            guard linkLeg === leg else { return }
        }
        for e in others {
            let id = RoomLinkLeg.identity(tag: e.tag)
            if remoteParticipants[id] != nil, sfu.remoteFeeds[id] != e.feed { sfu.remoteFeeds[id] = e.feed }
        }
        for e in others where remoteParticipants[RoomLinkLeg.identity(tag: e.tag)] == nil {
            connectLinkParticipant(RoomLinkLeg.identity(tag: e.tag), name: e.name, feed: e.feed, sfu)
        }
    }

    /// Adds a link participant to the call, with the events a friend's joining has:
    /// `roomDidStartCall` for the first, then `participantDidConnect`, then our tracks.
    func connectLinkParticipant(_ id: String, name: String, feed: UInt64, _ sfu: SFUMedia) {
        let p = RemoteParticipant(identity: id, room: self)
        p.name = name
        p.mode = .sendAndRecv
        remoteParticipants[id] = p
        sfu.remoteFeeds[id] = feed
        if !joined { post(nil, room: { $1.roomDidStartCall($0) }, participant: nil) }
        post(nil, room: { $1.room($0, participantDidConnect: p) }, participant: nil)
        if !joined {
            joined = true
            localParticipant.mode = options.mode
            wantPublished = [.audio: options.micEnabled, .video: options.cameraEnabled]
            wantMuted = [:]
            applyPublishing()
        }
        participantConnectedMedia(p)
    }

    /// A link participant's publications follow the streams the server lists for its feed (it
    /// has no friend channel to announce them): an Opus stream is its microphone, a video stream
    /// its camera.
    func linkSyncTracks(_ sfu: SFUMedia) {
        for (id, p) in remoteParticipants.sorted(by: { $0.key < $1.key }) {
            guard let feed = sfu.remoteFeeds[id] else { continue }
            let codecs = sfu.liveFeeds[feed] ?? []
            let has: [TrackKind: Bool] = [
                .audio: codecs.contains("opus"), .video: codecs.contains { ["vp8", "vp9", "h264", "av1"].contains($0) },
            ]
            for kind in [TrackKind.audio, .video] {
                let sid = kind.rawValue
                var s = CallSignal(type: "track", op: CallSignal.Op.publish)
                s.sid = sid
                if has[kind] == true, p.trackPublications[sid] == nil {
                    s.kind = kind.rawValue
                    s.text = kind == .audio ? "microphone" : "camera"
                    s.muted = false
                    receiveTrackSignal(s, from: id)
                } else if has[kind] != true, p.trackPublications[sid] != nil {
                    s.op = CallSignal.Op.unpublish
                    receiveTrackSignal(s, from: id)
                }
            }
        }
    }

    /// Asks the server to drop a participant from the room (`kick`, with the room's secret).
    func linkKick(_ feed: UInt64, _ sfu: SFUMedia) {
        guard let session = sfu.session, let handle = sfu.handle, let secret = sfu.server.roomSecret else { return }
        let body: JSONValue = [
            "request": "kick", "room": .int(Int64(sfu.server.room)), "secret": .string(secret), "id": .int(Int64(feed)),
        ]
        Task { _ = try? await session.message(handle: handle.handle, body: body) }
    }
}
