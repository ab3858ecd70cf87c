// The Swift examples of the reference page "Friends" (../shared/reference/revue-friends.md), copied
// unchanged, including the invitation examples of "Invite to a call" (call layer, issue 8). The page's
// text lost its indentation; the code is otherwise verbatim. Compiled in Swift 5 language mode.

import RevueSDK
/// Show each friend request, then accept it or just dismiss it.
final class FriendRequestInbox: RevueDelegate {
private(set) var requests: [String: String] = [:]
var onChange: (() -> Void)?
func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
requests[friendId] = message
onChange?()
}
/// Accept: the two of you become friends.
@MainActor
func accept(_ friendId: String) throws {
do {
try Revue.shared.friends.addFriendNorequest(friendId: friendId)
} catch FriendAddError.alreadyExists {
// Already friends, for example because you also sent them a request.
}
requests[friendId] = nil
onChange?()
}
/// Decline: there is no API for it. Remove the request from your own screen; the other side is not told.
func dismiss(_ friendId: String) {
requests[friendId] = nil
onChange?()
}
}

import RevueSDK
struct FriendRow {
let friendId: String
var name: String
var isOnline: Bool
}
/// Build the friend list from the SDK, then keep it current from RevueDelegate.
@MainActor
func loadFriendRows() -> [FriendRow] {
let friends = Revue.shared.friends
return friends.getFriendList().map { friendId in
FriendRow(
friendId: friendId,
name: friends.getFriendName(friendId: friendId),
isOnline: friends.getFriendPaths(friendId: friendId).isOnline
)
}
}
final class FriendListObserver: RevueDelegate {
var onNameChanged: ((String, String) -> Void)?
var onOnlineChanged: ((String, Bool) -> Void)?
func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {
onNameChanged?(friendId, name)
}
func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
onOnlineChanged?(friendId, paths.isOnline)
}
}

import RevueSDK
/// Delete a friend. If you are in a call or an invitation with them, the SDK ends it first.
@MainActor
func removeFriend(_ friendId: String) -> Bool {
do {
try Revue.shared.friends.deleteFriend(friendId: friendId)
return true
} catch FriendDeleteError.notFound {
// Not a friend any more: treat it as deleted.
return true
} catch {
// FriendDeleteError.failed: its code is always -1 and says nothing about the cause.
return false
}
}

import RevueSDK
/// Your own name, status message and status. Friends are told; your own RevueDelegate also receives
/// the friend event once, with your own identity, so one handler can update every name on screen.
final class ProfileObserver: RevueDelegate {
var onFriendName: ((String, String) -> Void)?
var onOwnName: ((String) -> Void)?
var onStatus: ((String, UserStatus) -> Void)?
private let ownId: String
/// Create it after initialize, when your own ID is known.
@MainActor
init() {
ownId = Revue.shared.revueId
}
func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {
if friendId == ownId {
onOwnName?(name)
} else {
onFriendName?(friendId, name)
}
}
func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
onStatus?(friendId, status)
}
}
@MainActor
func updateMyProfile() {
Revue.shared.setSelfName("Alice")
Revue.shared.setSelfStatusMessage("In the office until 6")
Revue.shared.setSelfStatus(.busy)
}

import RevueSDK
import Foundation
/// Your own message format. Its "kind" key keeps it clear of the SDK's reserved "type" values.
struct FriendChat: Codable {
var kind = "chat"
let text: String
}
/// Send a chat message to a friend, outside any call, and wait until their device has it.
/// Wrap your own content in your own format: a JSON object whose "type" is "msg", "adr" or "track"
/// is taken by the other side's SDK and never reaches their App.
@MainActor
func sendChat(_ text: String, to friendId: String) async -> Bool {
guard let data = try? JSONEncoder().encode(FriendChat(text: text)),
let payload = String(data: data, encoding: .utf8) else { return false }
do {
_ = try await Revue.shared.friends.sendMessage(friendId: friendId, message: payload)
return true
} catch FriendMessageError.friendNotReachable, FriendMessageError.sendQueueFull {
// Nothing left the device: you can try again later.
return false
} catch FriendMessageError.timeout {
// The message may have arrived without the receipt coming back. Resending can deliver it twice.
return false
} catch {
return false
}
}
/// The receiving side.
final class FriendChatReceiver: RevueDelegate {
var onChat: ((String, String) -> Void)?
func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
onChat?(friendId, message)
}
}

// From "Invite to a call".

import RevueSDK
/// Invite a friend to a call.
@MainActor
func startCallWithFriend(_ friendId: String) throws {
try Revue.shared.friends.sendInvitation(friendId: friendId, message: "video")
}
/// Accept an invitation you received. If this throws, keep the incoming-call screen so the user can retry.
@MainActor
func answerFriend(_ friendId: String) throws {
try Revue.shared.friends.acceptInvitation(friendId: friendId)
}
/// Cancel the invitation you sent, before the friend accepts.
@MainActor
func cancelCallToFriend(_ friendId: String) {
// .invalidState means the invitation has already ended, and didEndInvitation has already arrived.
try? Revue.shared.friends.cancelInvitation(friendId: friendId)
}

// From "Why an invitation ended".

import RevueSDK
/// Follow every invitation from start to end. Each one ends exactly once:
/// with didEndInvitation, or with participantDidConnect.
final class InvitationTracker: RevueDelegate, RoomDelegate {
enum Role { case caller, callee }
private var roles: [String: Role] = [:]
var onEnded: ((String, String) -> Void)?
var onConnected: ((String) -> Void)?
func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) {
roles[friendId] = .caller
}
func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
roles[friendId] = .callee
}
func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {
let role = roles.removeValue(forKey: friendId)
onEnded?(friendId, Self.text(for: reason, role: role))
}
func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {
roles[participant.identity] = nil
onConnected?(participant.identity)
}
/// The reason is from your own side: what you did, or that the other side ended it.
static func text(for reason: InvitationEndReason, role: Role?) -> String {
switch reason {
case .cancelled: return "You cancelled the call"
case .rejected: return "You declined the call"
case .timeout:
switch role {
case .callee: return "Lost contact with your friend"
case .caller, nil: return "No answer"
}
case .finished:
switch role {
case .caller: return "Your friend declined"
case .callee: return "Your friend cancelled or stopped waiting"
case nil: return "The call ended"
}
}
}
}
