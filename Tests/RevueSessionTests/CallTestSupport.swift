import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Records invitation, room and participant events of one peer as short strings ("sent(bob)",
/// "ended(bob,timeout)", "connect(bob)"), friend IDs replaced by test names.
@MainActor
final class CallRecorder: RevueDelegate, RoomDelegate, ParticipantDelegate, TrackDelegate {
    var names: [String: String] = [:]
    /// Invitation events and participantDidConnect/Disconnect, in order.
    var calls: [String] = []
    /// Every room-layer event.
    var room: [String] = []
    /// Every participant-layer event (from delegates added to each participant as it connects).
    var participant: [String] = []
    /// TrackDelegate events.
    var track: [String] = []
    /// Paths, unsubscribe and disconnect events of all three layers in arrival order, each prefixed
    /// with its layer ("friend:", "room:", "participant:"), for order checks.
    var timeline: [String] = []

    func n(_ id: String) -> String { names[id] ?? String(id.prefix(6)) }

    func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) {
        calls.append("sent(\(n(friendId)))")
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
        calls.append("received(\(n(friendId)),\(message ?? "nil"))")
    }
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {
        calls.append("ended(\(n(friendId)),\(reason))")
    }

    func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {
        calls.append("connect(\(n(participant.identity)))")
        self.room.append("connect(\(n(participant.identity)))")
        participant.delegates.add(delegate: self)
    }
    func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) {
        calls.append("disconnect(\(n(participant.identity)))")
        self.room.append("disconnect(\(n(participant.identity)),\(participant.disconnectReason.map { "\($0)" } ?? "nil"))")
        timeline.append("room:" + self.room.last!)
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        timeline.append("friend:paths(\(n(friendId)),\(paths.isOnline))")
    }
    func room(_ room: Room, participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths) {
        timeline.append("room:paths(\(n(participant.identity)),\(paths.isOnline))")
    }
    func participant(_ participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths) {
        timeline.append("participant:paths(\(n(participant.identity)),\(paths.isOnline))")
    }
    func room(_ room: Room, participant: Participant, didUpdateName name: String?) {
        self.room.append("name(\(n(participant.identity)),\(name ?? "nil"))")
    }
    func room(_ room: Room, participant: Participant, didUpdateStatus status: UserStatus) {
        self.room.append("status(\(n(participant.identity)),\(status))")
    }
    func room(_ room: Room, participant: Participant, didUpdateStatusMessage statusMessage: String?) {
        self.room.append("statusMessage(\(n(participant.identity)),\(statusMessage ?? "nil"))")
    }
    /// The call as a whole, in `room` (to check its order with the participant events).
    func roomDidStartCall(_ room: Room) { self.room.append("started") }
    func roomDidEndCall(_ room: Room) { self.room.append("ended") }
    func room(_ room: Room, callDidFailWithError error: CallError) { self.room.append("failed(\(error))") }
    func room(_ room: Room, localParticipant: LocalParticipant, didFailToPublishTrack kind: TrackKind, error: TrackPublishError) {
        self.room.append("publishFailed(\(kind))")
    }
    func room(_ room: Room, localParticipant: LocalParticipant, didPublishTrack publication: LocalTrackPublication) {
        self.room.append("publish(\(publication.sid))")
    }
    func room(_ room: Room, localParticipant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication) {
        self.room.append("unpublish(\(publication.sid))")
    }
    func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {
        self.room.append("subscribe(\(n(participant.identity)),\(publication.sid))")
    }
    func room(_ room: Room, participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication) {
        self.room.append("unsubscribe(\(n(participant.identity)),\(publication.sid))")
        timeline.append("room:" + self.room.last!)
    }
    func room(_ room: Room, participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
        self.room.append("muted(\(n(participant.identity)),\(trackPublication.sid),\(isMuted))")
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String) {
        self.room.append("message(\(n(participant.identity)),\(message))")
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {
        self.room.append("muteRequest(\(n(participant.identity)),\(isMuted))")
    }
    func room(_ room: Room, participant: Participant, didUpdateMode mode: ParticipantMode) {
        self.room.append("mode(\(n(participant.identity)),\(mode))")
    }
    func room(_ room: Room, participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality) {
        self.room.append("quality(\(n(participant.identity)),\(quality))")
    }
    /// Last statistics per "participant/sid".
    var statistics: [String: TrackStatistics] = [:]
    func room(
        _ room: Room, participant: Participant, trackPublication: TrackPublication,
        didUpdateStatistics statistics: TrackStatistics
    ) {
        self.statistics["\(n(participant.identity))/\(trackPublication.sid)"] = statistics
    }
    func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant]) {
        self.room.append("speakers(\(speakers.map { n($0.identity) }.joined(separator: ",")))")
    }

    func participant(_ participant: RemoteParticipant, didDisconnectWithReason reason: DisconnectReason) {
        self.participant.append("disconnected(\(n(participant.identity)),\(reason))")
        timeline.append("participant:" + self.participant.last!)
    }
    func participant(_ participant: Participant, didUpdateName name: String?) {
        self.participant.append("name(\(n(participant.identity)),\(name ?? "nil"))")
    }
    func participant(_ participant: Participant, didUpdateStatus status: UserStatus) {
        self.participant.append("status(\(n(participant.identity)),\(status))")
    }
    func participant(_ participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {
        self.participant.append("subscribe(\(n(participant.identity)),\(publication.sid))")
    }
    func participant(_ participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication) {
        self.participant.append("unsubscribe(\(n(participant.identity)),\(publication.sid))")
        timeline.append("participant:" + self.participant.last!)
    }
    func participant(_ participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
        self.participant.append("muted(\(n(participant.identity)),\(trackPublication.sid),\(isMuted))")
    }
    func participant(_ participant: RemoteParticipant, didReceiveMessage message: String) {
        self.participant.append("message(\(n(participant.identity)),\(message))")
    }
    func participant(_ participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {
        self.participant.append("muteRequest(\(n(participant.identity)),\(isMuted))")
    }
    func participant(_ participant: Participant, didUpdateMode mode: ParticipantMode) {
        self.participant.append("mode(\(n(participant.identity)),\(mode))")
    }

    func track(_ publication: LocalTrackPublication, didUpdateIsMuted isMuted: Bool) {
        track.append("muted(\(publication.sid),\(isMuted))")
    }
}

/// A named TestPeer with a CallRecorder on its Revue and its Room.
@MainActor
final class CallPeer {
    let name: String
    let peer: TestPeer
    let recorder = CallRecorder()
    var revue: Revue { peer.revue }
    var room: Room { peer.revue.room }
    var friends: FriendManager { peer.revue.friends }
    var id: String { peer.id }

    init(
        _ name: String, node: RendezvousNode, invitationTimeout: Double = 30, tweak: (inout RevueConfiguration) -> Void = { _ in }
    ) throws {
        self.name = name
        peer = try TestPeer(rendezvous: node) {
            $0.timeouts.invitationTimeout = invitationTimeout
            tweak(&$0)
        }
        attach()
    }

    func attach() {
        revue.delegates.add(delegate: recorder)
        room.delegates.add(delegate: recorder)
    }

    var calls: [String] { recorder.calls }

    func wait(_ what: String, timeout: Double = 10, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool)
        async
    {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while !condition() {
            if MonotonicTime.now > deadline {
                Issue.record(
                    "\(name): timed out waiting for \(what); calls: \(recorder.calls) room: \(recorder.room)",
                    sourceLocation: sourceLocation)
                return
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    func waitCall(_ e: String, timeout: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) async {
        await wait(e, timeout: timeout, sourceLocation: sourceLocation) { recorder.calls.contains(e) }
    }

    func waitRoom(_ e: String, timeout: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) async {
        await wait(e, timeout: timeout, sourceLocation: sourceLocation) { recorder.room.contains(e) }
    }
}

/// Makes every pair of the peers friends and names them in each other's recorders.
@MainActor
func makeFriends(_ peers: [CallPeer]) async throws {
    for a in peers { for b in peers { a.recorder.names[b.id] = b.name } }
    for (i, a) in peers.enumerated() {
        for b in peers[(i + 1)...] { try await befriend(a.peer, b.peer) }
    }
}

/// Invites `b` from `a`, `b` accepts, and both wait until each sees the other in its room.
@MainActor
func startCall(_ a: CallPeer, _ b: CallPeer, message: String = "join us") async throws {
    try a.friends.sendInvitation(friendId: b.id, message: message)
    await b.wait("invitation") { b.room.invitations[a.id] != nil }
    try b.friends.acceptInvitation(friendId: a.id)
    await a.wait("\(b.name) in \(a.name)'s room") { a.room.remoteParticipants[b.id] != nil }
    await b.wait("\(a.name) in \(b.name)'s room") { b.room.remoteParticipants[a.id] != nil }
}
