// What the scenario tests share: a recorder that keeps every delegate callback in arrival order,
// a polling wait on the main actor, and two peers (Revue.shared and a second instance) that find
// each other through an in-process rendezvous node on loopback.
import Foundation
import RevueSDK
import Testing

/// Records the callbacks of all three delegate protocols, in the order they arrive.
@MainActor
final class EventRecorder: RevueDelegate, RoomDelegate, ParticipantDelegate {
    var friendRequests: [(from: String, text: String)] = []
    var nameUpdates: [(friend: String, name: String)] = []
    var statusUpdates: [(friend: String, status: UserStatus)] = []
    var onlineUpdates: [(friend: String, online: Bool)] = []
    var friendMessages: [(friend: String, text: String)] = []
    var invitationsSent: [String] = []
    var invitationsReceived: [(friend: String, text: String?)] = []
    var invitationEnds: [(friend: String, reason: InvitationEndReason)] = []
    var connected: [String] = []
    var muteRequests: [(from: String, muted: Bool)] = []
    var roomMessages: [(from: String, text: String)] = []
    var speakerLists: [[String]] = []
    var speakingChanges: [Bool] = []
    var muteChanges: [Bool] = []

    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
        friendRequests.append((friendId, message))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {
        nameUpdates.append((friendId, name))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
        statusUpdates.append((friendId, status))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        onlineUpdates.append((friendId, paths.isOnline))
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
        friendMessages.append((friendId, message))
    }
    func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) {
        invitationsSent.append(friendId)
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
        invitationsReceived.append((friendId, message))
    }
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {
        invitationEnds.append((friendId, reason))
    }
    func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {
        connected.append(participant.identity)
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {
        muteRequests.append((participant.identity, isMuted))
    }
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String) {
        roomMessages.append((participant.identity, message))
    }
    func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant]) {
        speakerLists.append(speakers.map(\.identity))
    }
    func participant(_ participant: Participant, didUpdateIsSpeaking isSpeaking: Bool) {
        speakingChanges.append(isSpeaking)
    }
    func participant(_ participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
        muteChanges.append(isMuted)
    }

    /// The reasons of every ended invitation, in order.
    var endReasons: [InvitationEndReason] { invitationEnds.map(\.reason) }
}

/// Polls `condition` every 10 ms on the main actor until it holds or `seconds` pass.
@MainActor
func waitUntil(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// A fresh data directory under the temporary directory; the caller removes it.
func scratchDirectory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("revue-scenario-\(UUID().uuidString)").path
}

/// Revue.shared ("me") and a second instance ("peer") on loopback, both registered with one
/// in-process rendezvous node and each with its own data directory. `close()` tears all of it down.
@MainActor
final class TwoPeers {
    let node: RendezvousNode
    let base = scratchDirectory()
    let peer = Revue()
    var me: Revue { Revue.shared }

    init(invitationTimeout: Double? = nil) throws {
        node = try RendezvousNode(host: "127.0.0.1")
        func configuration(_ name: String) -> RevueConfiguration {
            var c = RevueConfiguration(dataDirectory: base + "/" + name)
            c.bindHost = "127.0.0.1"
            c.rendezvousNodes = ["127.0.0.1:\(node.port)"]
            c.timeouts.rendezvousInterval = 0.2
            c.timeouts.handshakeRetryInterval = 0.2
            if let invitationTimeout { c.timeouts.invitationTimeout = invitationTimeout }
            return c
        }
        do {
            try Revue.shared.initialize(configuration("me"))
            try peer.initialize(configuration("peer"))
        } catch {
            close()
            throw error
        }
    }

    /// Makes the two friends without a request round trip and waits until each sees the other online.
    func befriend() async throws -> Bool {
        try peer.friends.addFriend(address: me.revueAddress, message: "hi")
        _ = try? me.friends.addFriendNorequest(friendId: peer.revueId)
        return await waitUntil {
            self.me.friends.getFriendPaths(friendId: self.peer.revueId).isOnline
                && self.peer.friends.getFriendPaths(friendId: self.me.revueId).isOnline
        }
    }

    func close() {
        peer.destroy()
        Revue.shared.destroy()
        node.stop()
        try? FileManager.default.removeItem(atPath: base)
    }
}
