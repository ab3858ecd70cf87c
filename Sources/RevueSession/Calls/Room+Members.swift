// Membership of the mesh: participants connecting and leaving, group members joining each other,
// in-call messages and mute requests, friend paths and profiles mirrored onto participants.

internal import MediaCore

extension Room {
    /// Every message from a friend is offered here first (SessionCore's reservedMessageHandler):
    /// a call signal is handled and true returned; an App message returns false. One JSON decode
    /// per message, two only for a JSON object that is not a call signal.
    func receiveReserved(_ body: [UInt8], from id: String) -> Bool {
        guard let s = CallSignal.parse(body) else { return SessionCore.isReserved(body) }
        guard SessionCore.reservedTypes.contains(s.type) else { return false }
        receive(s, from: id)
        return true
    }

    /// Handles one call signal from a friend.
    func receive(_ s: CallSignal, from id: String) {
        // The friend is evidently online, and its stream can bring signalling for a call of our
        // previous run before the paths event reached the room. The hello goes ahead of any
        // answer (a hang-up, an end), so the friend ends that call as lost, not as hung up.
        greet(id)
        answerUnknownCall(s, from: id)
        switch s.type {
        case "track": receiveTrackSignal(s, from: id)
        case "adr": receiveMediaSignal(s, from: id)
        default: break
        }
        guard s.type == "msg" else { return }
        switch s.op {
        case CallSignal.Op.hello:
            receiveHello(s, from: id)
        case CallSignal.Op.invite, CallSignal.Op.cancel, CallSignal.Op.end, CallSignal.Op.reject,
            CallSignal.Op.accept, CallSignal.Op.connect:
            receiveInvitationSignal(s, from: id)
        case CallSignal.Op.introduce:
            receiveIntroduction(s, from: id)
        case CallSignal.Op.intros:
            guard remoteParticipants[id] != nil else { return refuse(id, answer: false) }
            joinIntroduced(s.intros ?? [:])
        case CallSignal.Op.join:
            receiveJoin(from: id, token: s.inv, mode: s.mode)
        case CallSignal.Op.joined:
            guard introductions.endJoin(with: id) || remoteParticipants[id] != nil else {
                return refuse(id, answer: true)
            }
            if remoteParticipants[id] == nil { connectParticipant(id, inv: nil, mode: s.mode) }
        case CallSignal.Op.hangup:
            introductions.endJoin(with: id)
            if let p = remoteParticipants[id] { hangUp(p, reason: .remoteHangUp, notify: false) }
        case CallSignal.Op.chat:
            guard let p = remoteParticipants[id], let text = s.text else { return }
            post(
                p, room: { $1.room($0, participant: p, didReceiveMessage: text) },
                participant: { $0.participant(p, didReceiveMessage: text) })
        case CallSignal.Op.muteRequest:
            guard let p = remoteParticipants[id], let muted = s.muted else { return }
            post(
                p, room: { $1.room($0, participant: p, didReceiveMuteRequest: muted) },
                participant: { $0.participant(p, didReceiveMuteRequest: muted) })
        case CallSignal.Op.mode:
            guard let p = remoteParticipants[id], let mode = s.mode.flatMap(ParticipantMode.init(rawValue:)), mode != p.mode
            else { return }
            p.mode = mode
            modeChangedRemotely(p)
            post(
                p, room: { $1.room($0, participant: p, didUpdateMode: mode) },
                participant: { $0.participant(p, didUpdateMode: mode) })
        default:
            break
        }
    }

    /// A friend's `hello`: a new epoch means the friend's process restarted, so a call leg with
    /// it belongs to a run that is gone: it ends with `.connectionLost` (even when the restart was
    /// quicker than the connection timeout, so the friend never looked offline).
    func receiveHello(_ s: CallSignal, from id: String) {
        guard friendRuns.receiveHello(s, from: id) else { return }
        if let p = remoteParticipants[id] { hangUp(p, reason: .connectionLost, notify: false) }
        introductions.friendRestarted(id)
    }

    /// Signalling about a call we do not have with this friend (our process restarted, or the call
    /// ended here first) is answered with a hang-up, at most once a second per friend, so the
    /// other side does not keep a participant that is not there.
    func answerUnknownCall(_ s: CallSignal, from id: String) {
        guard remoteParticipants[id] == nil, !introductions.isJoining(id), invitations[id] == nil,
            !introductions.holdsJoin(from: id)
        else { return }
        let now = self.now
        guard friendRuns.answersUnknownCall(s, from: id, now: now) else { return }
        // Not counted when the stream could not take it yet (the connection is not complete).
        if send(CallSignal(op: CallSignal.Op.hangup), to: id) { friendRuns.answeredUnknownCall(of: id, at: now) }
    }

    /// Tells a friend which run of ours it talks to, once each time it comes online (not before
    /// its stream can take the hello: a message can arrive before the connection is complete).
    func greet(_ id: String) {
        guard let hello = friendRuns.greeting(for: id) else { return }
        if send(hello, to: id) { friendRuns.greeted(id) }
    }

    /// Adds a friend to the call: participantDidConnect (room only), then your tracks to them.
    func connectParticipant(_ id: String, inv: String?, mode: String?) {
        guard remoteParticipants[id] == nil, let core, let f = core.friends[id] else { return }
        let p = RemoteParticipant(identity: id, room: self)
        p.name = f.stored.name.isEmpty ? nil : f.stored.name
        p.statusMessage = f.stored.statusMessage.isEmpty ? nil : f.stored.statusMessage
        p.status = UserStatus(rawValue: f.stored.status) ?? .none
        p.mode = mode.flatMap(ParticipantMode.init(rawValue:)) ?? .sendAndRecv
        p.paths = f.emittedPaths
        remoteParticipants[id] = p
        introductions.endJoin(with: id)
        // An invitation with them still in progress (they joined through an introduction
        // meanwhile) ends here: participantDidConnect is its one end, and a late accept or
        // connect for it finds nothing.
        invitations.connected(id, through: inv)
        if !joined { post(nil, room: { $1.roomDidStartCall($0) }, participant: nil) }
        post(nil, room: { $1.room($0, participantDidConnect: p) }, participant: nil)
        if !joined {
            joined = true
            sfuLeg.callStarted(server: environment.mediaLegs ? options.sfu : nil)
            localParticipant.mode = options.mode
            wantPublished = [.audio: options.micEnabled, .video: options.cameraEnabled]
            wantMuted = [:]
            applyPublishing()
        } else {
            announceTracks(to: id)
        }
        participantConnectedMedia(p)
        introduce(id)
    }

    /// Removes a participant: tells them when `notify`, then participantDidDisconnect on the room
    /// and didDisconnectWithReason on the participant (after their tracks were unsubscribed).
    func hangUp(_ p: RemoteParticipant, reason: DisconnectReason, notify: Bool) {
        let id = p.identity
        guard remoteParticipants[id] === p else { return }
        if notify { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
        for pub in p.remoteTrackPublications where pub.isSubscribed {
            pub.isSubscribed = false
            post(
                p, room: { $1.room($0, participant: p, didUnsubscribeTrack: pub) },
                participant: { $0.participant(p, didUnsubscribeTrack: pub) })
        }
        participantDisconnectedMedia(p)
        remoteParticipants[id] = nil
        invitations.participantLeft(id)
        forgetIntroductions(of: id)
        p.disconnectReason = reason
        if p.isSpeaking {
            p.isSpeaking = false
            updateActiveSpeakers()
        }
        post(
            p, room: { $1.room($0, participantDidDisconnect: p) },
            participant: { $0.participant(p, didDisconnectWithReason: reason) })
        if remoteParticipants.isEmpty {
            if reason == .connectionLost {
                post(nil, room: { $1.room($0, callDidFailWithError: .connectionLost) }, participant: nil)
            }
            leaveCall()
            post(nil, room: { $1.roomDidEndCall($0) }, participant: nil)
        }
    }

    /// The last participant left: your tracks are unpublished and the next call starts afresh.
    func leaveCall() {
        for pub in localParticipant.localTrackPublications { unpublish(pub, tell: false) }
        stopSFU()
        joined = false
        sfuLeg.callEnded()
        linkRoomEnded()
        introductions.callEnded()
        localParticipant.mode = options.mode
        activeSpeakers = []
    }

    /// In-call messages: friend messages in the reserved format, with their receipts.
    /// Sends to every recipient concurrently, each waiting up to `timeout` for its receipt; one
    /// result per friend ID.
    func sendChat(_ text: String, to participants: [RemoteParticipant], timeout: Duration) async throws(FriendMessageError)
        -> [String: Result<UInt32, FriendMessageError>]
    {
        guard let core else { throw .friendNotFound }
        var s = CallSignal(op: CallSignal.Op.chat)
        s.text = text
        let json = s.json
        guard json.utf8.count <= FriendManager.maxMessageLength else { throw .messageTooLong }
        let ids = Set(participants.map(\.identity))
        // All queued at once (each task enqueues on the main actor before the first await ends).
        let sends = ids.sorted().map { id in
            (id, Task { @MainActor in await core.sendMessage(friendId: id, message: json, timeout: timeout) })
        }
        var results: [String: Result<UInt32, FriendMessageError>] = [:]
        for (id, task) in sends { results[id] = await task.value }
        return results
    }

    /// Every 50 ms: invitation timers, stale joins, lost participants, connection quality.
    func tick(now: MonotonicTime) {
        tickInvitations(now: now)
        tickIntroductions(now: now)
        // A participant offline for the grace period leaves (without a grace, pathsChanged did).
        let lostAfter = core?.timeouts.callLostTimeout ?? .zero
        for p in remoteParticipants.values.sorted(by: { $0.identity < $1.identity }) {
            if let since = p.offlineSince, now - since >= lostAfter {
                hangUp(p, reason: .connectionLost, notify: false)
                continue
            }
            // The live RTT (a new RTT alone does not change the paths value the participant holds).
            let rtt = core?.friends[p.identity]?.paths(now: now, timeout: connectionTimeout).paths.first?.roundTripTime
            let quality = mediaStarved(p, now: now) ? .poor : ConnectionQuality.from(loss: mediaLoss(p), roundTripTime: rtt)
            if quality != p.connectionQuality {
                p.connectionQuality = quality
                post(
                    p, room: { $1.room($0, participant: p, didUpdateConnectionQuality: quality) },
                    participant: { $0.participant(p, didUpdateConnectionQuality: quality) })
            }
        }
        tickMedia(now: now)
    }

    /// A friend's paths changed (the friend layer's didUpdatePaths was queued just before). A
    /// participant going offline leaves the call at once (`.connectionLost`, after its
    /// didUpdatePaths), unless `RevueTimeouts.callLostTimeout` gives it a grace period (`tick`).
    func pathsChanged(_ id: String, _ paths: FriendConnectionPaths) {
        if paths.isOnline {
            greet(id)
        } else {
            friendRuns.wentOffline(id)
        }
        guard let p = remoteParticipants[id] else { return }
        p.paths = paths
        let resumed = paths.isOnline && p.offlineSince != nil
        p.offlineSince = paths.isOnline ? nil : (p.offlineSince ?? self.now)
        // Back online within the grace, or on another path: media goes where the friend is now.
        if paths.isOnline { followPath(id, resumed: resumed) }
        post(
            p, room: { $1.room($0, participant: p, didUpdatePaths: paths) },
            participant: { $0.participant(p, didUpdatePaths: paths) })
        if !paths.isOnline, (core?.timeouts.callLostTimeout ?? .zero) <= .zero {
            hangUp(p, reason: .connectionLost, notify: false)
        }
    }

    /// A friend's (or your own, with your id) name, status message or status changed.
    func profileChanged(_ id: String, _ field: SessionCore.ProfileField) {
        guard let core else { return }
        let p: Participant
        if id == core.ownId {
            p = localParticipant
            guard joined else { refreshLocalProfile(core); return }
        } else {
            guard let r = remoteParticipants[id], let f = core.friends[id] else { return }
            p = r
            _ = f
        }
        let stored: (name: String, statusMessage: String, status: UInt8)
        if id == core.ownId {
            stored = (core.profile.name, core.profile.statusMessage, core.profile.status)
        } else {
            let f = core.friends[id]!.stored
            stored = (f.name, f.statusMessage, f.status)
        }
        switch field {
        case .name:
            let name: String? = stored.name.isEmpty ? nil : stored.name
            p.name = name
            post(
                p, room: { $1.room($0, participant: p, didUpdateName: name) },
                participant: { $0.participant(p, didUpdateName: name) })
        case .statusMessage:
            let text: String? = stored.statusMessage.isEmpty ? nil : stored.statusMessage
            p.statusMessage = text
            post(
                p, room: { $1.room($0, participant: p, didUpdateStatusMessage: text) },
                participant: { $0.participant(p, didUpdateStatusMessage: text) })
        case .status:
            let status = UserStatus(rawValue: stored.status) ?? .none
            p.status = status
            post(
                p, room: { $1.room($0, participant: p, didUpdateStatus: status) },
                participant: { $0.participant(p, didUpdateStatus: status) })
        }
    }
}
