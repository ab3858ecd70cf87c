// A package seam for fuzzing the call signalling (FuzzEntries.callSignal, docs/robustness.md):
// drives a real Room's signal handling with messages as they arrive from friends, without media
// legs, and reads back what the room holds and what it sent. Nothing here runs in production.
internal import MediaCore

/// How much call state a room holds now: what a stranger or a hostile friend could try to grow.
package struct CallStateCounts: Sendable, Equatable {
    /// Remote participants, and the most publications any one of them has.
    package var participants = 0
    package var mostPublications = 0
    /// Introductions waiting for their newcomer, tokens remembered as used, joins held for an
    /// introduction, joins we sent, invitations in progress, friends answered for an unknown call,
    /// friends' epochs.
    package var introductions = 0
    package var usedIntroductions = 0
    package var heldJoins = 0
    package var pendingJoins = 0
    package var invitations = 0
    package var unknownCallAnswered = 0
    package var friendEpochs = 0
}

extension Room {
    /// The publication cap per remote participant (`maxRemotePublications`), for harnesses.
    package static var remotePublicationLimit: Int { maxRemotePublications }
    /// The introduction cap (`RoomIntroductions.capacity`), for harnesses.
    package static var introductionLimit: Int { RoomIntroductions.capacity }

    /// Fuzzing: handles one reserved message from a friend exactly as the friend's stream hands it
    /// over. Main actor; cost: one JSON decode plus whatever the message does.
    package func receiveForFuzzing(_ text: String, from friendId: String) {
        _ = receiveReserved(Array(text.utf8), from: friendId)
    }

    /// Fuzzing: runs the room's 50 ms timer work as if `ahead` more time had passed, so deadlines
    /// pass. Main actor.
    package func tickForFuzzing(ahead: Duration) { tick(now: self.now + ahead) }

    /// Fuzzing: the friend came online or went offline (what the friend layer reports). Main actor.
    package func pathsChangedForFuzzing(_ friendId: String, online: Bool) {
        pathsChanged(
            friendId,
            online ? FriendConnectionPaths(paths: [FriendConnectionPath(kind: .directLAN, endpoint: "127.0.0.1:9")]) : .offline)
    }

    /// Fuzzing: what deleting the friend does to the call (hang up, cancel, reject). Main actor.
    package func endForDeletionForFuzzing(_ friendId: String) { endForDeletion(friendId) }

    /// The friend IDs of the remote participants now. Main actor.
    package var participantIds: Set<String> { Set(remoteParticipants.keys) }

    /// Counts of what the room holds (`CallStateCounts`). Main actor; cost: one pass over the
    /// participants.
    package var stateCounts: CallStateCounts {
        var c = CallStateCounts()
        c.participants = remoteParticipants.count
        c.mostPublications = remoteParticipants.values.map(\.trackPublications.count).max() ?? 0
        let introductionCounts = introductions.counts
        c.introductions = introductionCounts.introductions
        c.usedIntroductions = introductionCounts.used
        c.heldJoins = introductionCounts.held
        c.pendingJoins = introductionCounts.pending
        c.invitations = invitations.count
        let runCounts = friendRuns.counts
        c.unknownCallAnswered = runCounts.unknownCallAnswered
        c.friendEpochs = runCounts.epochs
        return c
    }

    /// Fuzzing: forgets every call, invitation and introduction without telling anyone or raising
    /// events, so the next input starts from an idle room. Main actor.
    package func resetForFuzzing() {
        for p in remoteParticipants.values { p.delegates.removeAll() }
        forgetCallState()
        localParticipant.mode = options.mode
    }
}

/// The fields of a call signal that decide who may join a call and how invitations end (a value;
/// any thread).
package struct CallSignalSummary: Sendable, Equatable {
    /// "msg", "adr" or "track", and what the message does (`CallSignal.Op`).
    package var type: String
    package var op: String
    /// The invitation or introduction token.
    package var inv: String?
    /// Invitation text, chat text, track name, or the newcomer of an introduction.
    package var text: String?
    /// Introduction tokens by member (`intros`).
    package var intros: [String: String]?
}

extension SessionCore {
    /// Fuzzing: gives a friend a live session (random keys, no route), so call signalling to it
    /// is queued as for a connected friend; nothing leaves the process. Main actor.
    package func connectForFuzzing(friendId: String) {
        guard let f = friends[friendId] else { return }
        if f.current == nil {
            f.current = TransportSession(
                localIndex: RandomBytes.uint32(), remoteIndex: RandomBytes.uint32(),
                keys: (SecretKeyBytes(RandomBytes.bytes(32)), SecretKeyBytes(RandomBytes.bytes(32))),
                isInitiator: true, created: scheduler.now)
        }
        f.lastReceived = scheduler.now
    }

    /// Fuzzing: the call-layer messages queued for a friend since the last call, as JSON text,
    /// taken off its stream (as if acknowledged at once). Main actor.
    package func takeReservedForFuzzing(friendId: String) -> [String] {
        guard let f = friends[friendId] else { return [] }
        let sent = f.outbound.filter { $0.kind == .message && $0.messageId == nil }
        f.outbound.removeAll { $0.kind == .message && $0.messageId == nil }
        return sent.map { String(decoding: $0.body, as: UTF8.self) }
    }

    /// Fuzzing: parses `text` as a call signal and, when it parses, whether writing it back and
    /// parsing again gives the same signal (nil: not a call signal). Main actor.
    package static func callSignalRoundTrips(_ text: String) -> Bool? {
        guard let s = CallSignal.parse(text) else { return nil }
        return CallSignal.parse(s.json) == s
    }

    /// Fuzzing: what the room's decoder reads from `text` (nil: not a call signal). Main actor;
    /// cost: one JSON decode.
    package static func callSignalSummary(_ text: String) -> CallSignalSummary? {
        CallSignal.parse(text).map { CallSignalSummary(type: $0.type, op: $0.op, inv: $0.inv, text: $0.text, intros: $0.intros) }
    }
}
