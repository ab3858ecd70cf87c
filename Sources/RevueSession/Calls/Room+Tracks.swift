// Track publications and subscriptions, announced with the reserved "track" messages; the modes'
// effect on them.

extension Room {
    /// Publishes or unpublishes what the local participant wants, given its mode.
    func applyPublishing() {
        for kind in [TrackKind.audio, .video] {
            let want = joined && localParticipant.mode.sends && (wantPublished[kind] ?? false)
            let current = localParticipant.publication(kind)
            if want, current == nil {
                publish(kind)
            } else if !want, let current {
                unpublish(current, tell: true)
            }
        }
    }

    func setPublished(_ kind: TrackKind, _ enabled: Bool) {
        if !joined {
            if kind == .audio { options.micEnabled = enabled } else { options.cameraEnabled = enabled }
            return
        }
        wantPublished[kind] = enabled
        // Turning a track off and on again starts it unmuted; a mode round trip keeps its mute.
        wantMuted[kind] = nil
        applyPublishing()
    }

    func publish(_ kind: TrackKind) {
        let local = localParticipant
        let pub = LocalTrackPublication(
            sid: kind.rawValue, kind: kind, name: kind == .audio ? "microphone" : "camera",
            isMuted: wantMuted[kind] ?? false, participant: local)
        // The engine first: a track whose stream cannot be set up is never announced.
        if let failure = localTrackPublished(pub) {
            wantPublished[kind] = false
            post(
                nil, room: { $1.room($0, localParticipant: local, didFailToPublishTrack: kind, error: failure) }, participant: nil
            )
            return
        }
        local.trackPublications[pub.sid] = pub
        for id in remoteParticipants.keys { send(publishSignal(pub), to: id) }
        post(
            local, room: { $1.room($0, localParticipant: local, didPublishTrack: pub) },
            participant: { $0.participant(local, didPublishTrack: pub) })
    }

    func unpublish(_ pub: LocalTrackPublication, tell: Bool) {
        let local = localParticipant
        guard local.trackPublications[pub.sid] === pub else { return }
        local.trackPublications[pub.sid] = nil
        localTrackUnpublished(pub)
        if tell {
            var s = CallSignal(type: "track", op: CallSignal.Op.unpublish)
            s.sid = pub.sid
            for id in remoteParticipants.keys { send(s, to: id) }
        }
        post(
            local, room: { $1.room($0, localParticipant: local, didUnpublishTrack: pub) },
            participant: { $0.participant(local, didUnpublishTrack: pub) })
    }

    func publishSignal(_ pub: TrackPublication) -> CallSignal {
        var s = CallSignal(type: "track", op: CallSignal.Op.publish)
        s.sid = pub.sid
        s.kind = pub.kind.rawValue
        s.text = pub.name
        s.muted = pub.isMuted
        return s
    }

    /// Tells a newly joined participant what you publish.
    func announceTracks(to id: String) {
        for pub in localParticipant.localTrackPublications { send(publishSignal(pub), to: id) }
    }

    func setMuted(_ pub: LocalTrackPublication, _ muted: Bool) {
        guard pub.isMuted != muted, localParticipant.trackPublications[pub.sid] === pub else { return }
        pub.isMuted = muted
        wantMuted[pub.kind] = muted
        localTrackMuteChanged(pub)
        var s = CallSignal(type: "track", op: CallSignal.Op.mute)
        s.sid = pub.sid
        s.muted = muted
        for id in remoteParticipants.keys { send(s, to: id) }
        core?.schedule(
            .action { [weak pub] in
                guard let pub else { return }
                for d in pub.delegates.all { d.track(pub, didUpdateIsMuted: muted) }
            })
    }

    /// Subscribes or unsubscribes a remote publication to match your mode and wish.
    func updateSubscription(_ pub: RemoteTrackPublication) {
        guard let p = pub.participant as? RemoteParticipant, remoteParticipants[p.identity] === p,
            p.trackPublications[pub.sid] === pub
        else { return }
        let should = joined && localParticipant.mode.receives && pub.wanted
        guard should != pub.isSubscribed else { return }
        pub.isSubscribed = should
        var s = CallSignal(type: "track", op: CallSignal.Op.subscribe)
        s.sid = pub.sid
        s.subscribed = should
        send(s, to: p.identity)
        remoteSubscriptionChanged(pub)
        if should {
            post(
                p, room: { $1.room($0, participant: p, didSubscribeTrack: pub) },
                participant: { $0.participant(p, didSubscribeTrack: pub) })
        } else {
            post(
                p, room: { $1.room($0, participant: p, didUnsubscribeTrack: pub) },
                participant: { $0.participant(p, didUnsubscribeTrack: pub) })
        }
    }

    func receiveTrackSignal(_ s: CallSignal, from id: String) {
        guard let p = remoteParticipants[id], let sid = s.sid else { return }
        switch s.op {
        case CallSignal.Op.publish:
            guard p.trackPublications[sid] == nil, let kind = s.kind.flatMap(TrackKind.init(rawValue:)) else { return }
            // What a participant can make us keep is bounded: a few publications with short IDs
            // and names. The rest is dropped and counted; the publications already there stay.
            guard p.trackPublications.count < Self.maxRemotePublications, sid.utf8.count <= Self.maxTrackIdLength,
                (s.text?.utf8.count ?? 0) <= Self.maxTrackNameLength
            else {
                return refuse(id, answer: false)
            }
            let pub = RemoteTrackPublication(sid: sid, kind: kind, name: s.text ?? sid, isMuted: s.muted ?? false, participant: p)
            p.trackPublications[sid] = pub
            if kind == .audio {
                if p.audioPublished { remoteAudioRepublished(p) }
                p.audioPublished = true
            }
            updateSubscription(pub)
        case CallSignal.Op.unpublish:
            guard let pub = p.trackPublications[sid] as? RemoteTrackPublication else { return }
            pub.wanted = false
            updateSubscription(pub)
            p.trackPublications[sid] = nil
        case CallSignal.Op.mute:
            guard let pub = p.trackPublications[sid], let muted = s.muted, pub.isMuted != muted else { return }
            pub.isMuted = muted
            remoteMuteChanged(p, pub)
            post(
                p, room: { $1.room($0, participant: p, trackPublication: pub, didUpdateIsMuted: muted) },
                participant: { $0.participant(p, trackPublication: pub, didUpdateIsMuted: muted) })
        case CallSignal.Op.subscribe:
            remoteWantsTrack(p, sid: sid, wants: s.subscribed ?? false)
        case CallSignal.Op.speaking:
            remoteSpeaking(p, speaking: s.speaking ?? false, level: s.level ?? 0)
        default:
            break
        }
    }

    /// A participant changed mode: nothing to do for the signalling (their unpublish messages
    /// follow); media stops going to a participant that no longer receives.
    func modeChangedRemotely(_ p: RemoteParticipant) {
        remoteModeChanged(p)
    }
}
