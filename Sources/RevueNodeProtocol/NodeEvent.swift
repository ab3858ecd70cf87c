package import MediaCore
public import RevueSession

// The revue-node event protocol (docs/revue-node.md): every line revue-node writes on stdout is
// one `NodeEvent`, written by `NodeEvent.line` (one JSON object, keys sorted) and read back by
// `NodeEvent(line:)`. revue-node builds its events from the SDK's delegate calls and command
// results; programs that drive it read them. The fuzz target fuzz-node-command reads arbitrary
// lines as events too.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One line revue-node writes on stdout: `ready`, a command's reply (`ok` or `error`), a
/// `RevueDelegate` event, or a `RoomDelegate` event (`"layer":"room"`). The `"event"` value is
/// `name`; a field is written under its argument label (a `NodeParticipant` as `friendId` and
/// `isLocal`), and docs/revue-node.md lists every event's keys.
/// Thread rule: a value type; `line` and `init(line:)` run on any thread. Cost: its strings and arrays.
public enum NodeEvent: Sendable, Equatable {
    /// The first line: the process is up (a peer or a rendezvous node).
    case ready(NodeReady)
    /// A command succeeded (`"event":"ok"`).
    case ok(NodeReply)
    /// A command failed, or a line was not a valid command (`"event":"error"`).
    case error(NodeErrorReply)
    /// `RevueDelegate.revue(_:didReceiveFriendRequest:message:)`.
    case didReceiveFriendRequest(friendId: String, message: String)
    /// `RevueDelegate.revue(_:friend:didUpdateName:)` (your own `revueId` after `set-name`).
    case didUpdateName(friendId: String, name: String)
    /// `RevueDelegate.revue(_:friend:didUpdateStatusMessage:)`.
    case didUpdateStatusMessage(friendId: String, statusMessage: String)
    /// `RevueDelegate.revue(_:friend:didUpdateStatus:)`; `status` is written `none`, `away` or `busy`.
    case didUpdateStatus(friendId: String, status: UserStatus)
    /// `RevueDelegate.revue(_:friend:didUpdatePaths:)`: whether the friend is reachable, and every path.
    case didUpdatePaths(friendId: String, isOnline: Bool, paths: [NodePath])
    /// `RevueDelegate.revue(_:friend:didReceiveMessage:)`.
    case didReceiveMessage(friendId: String, message: String)
    /// `RevueDelegate.revue(_:didUpdateIsDiscoverable:)`.
    case didUpdateIsDiscoverable(isDiscoverable: Bool)
    /// `RevueDelegate.revue(_:friend:didSendInvitation:)`; a nil message is written `null`.
    case didSendInvitation(friendId: String, message: String?)
    /// `RevueDelegate.revue(_:friend:didReceiveInvitation:)`; a nil message is written `null`.
    case didReceiveInvitation(friendId: String, message: String?)
    /// `RevueDelegate.revue(_:friend:didEndInvitation:)`; `reason` is written by its case name.
    case didEndInvitation(friendId: String, reason: InvitationEndReason)
    /// A `RoomDelegate` event: a line with `"layer":"room"`.
    case room(NodeRoomEvent)

    /// The `"event"` value: `ready`, `ok`, `error`, or the delegate method's name. Four friend
    /// events share their name with a room event (`didUpdateName`, `didUpdateStatusMessage`,
    /// `didUpdateStatus`, `didReceiveMessage`); `"layer"` tells them apart. Cost: none.
    public var name: String {
        switch self {
        case .ready: "ready"
        case .ok: "ok"
        case .error: "error"
        case .didReceiveFriendRequest: "didReceiveFriendRequest"
        case .didUpdateName: "didUpdateName"
        case .didUpdateStatusMessage: "didUpdateStatusMessage"
        case .didUpdateStatus: "didUpdateStatus"
        case .didUpdatePaths: "didUpdatePaths"
        case .didReceiveMessage: "didReceiveMessage"
        case .didUpdateIsDiscoverable: "didUpdateIsDiscoverable"
        case .didSendInvitation: "didSendInvitation"
        case .didReceiveInvitation: "didReceiveInvitation"
        case .didEndInvitation: "didEndInvitation"
        case .room(let e): e.name
        }
    }

    /// The event as revue-node writes it: one line of JSON without the newline, object keys
    /// sorted, slashes unescaped. nil when the event holds a non-finite number (an `rtt`), which
    /// JSON cannot write. Cost: one `JSONEncoder` run over the event's fields.
    public var line: String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Reads one line revue-node wrote (without its newline). Keys an event does not take are
    /// ignored; a line that is not a JSON object, names no known event, or lacks a field of its
    /// event (or has one of another type) throws a `DecodingError`.
    /// Cost: one `JSONDecoder` run over the line.
    public init(line: String) throws {
        self = try JSONDecoder().decode(NodeEvent.self, from: Data(line.utf8))
    }
}

/// The `ready` line: what kind of process started, and where it listens.
/// Thread rule: a value type. Cost: none beyond its strings.
public enum NodeReady: Sendable, Equatable {
    /// `"mode":"peer"`: the own `address` (76 hex digits) and `revueId` (64), the UDP `port`,
    /// and whether LAN discovery runs (`lan`).
    case peer(address: String, revueId: String, port: UInt16, lan: Bool)
    /// `"mode":"rendezvous"`: the UDP `port`, and the TURN servers the node hands its peers
    /// credentials for (`turn`, `turnLifetime`; absent without `--turn-url`).
    case rendezvous(port: UInt16, turn: NodeTURNOffer?)
}

/// A rendezvous node's TURN offer in its `ready` line.
/// Thread rule: a value type. Cost: its strings.
public struct NodeTURNOffer: Sendable, Equatable {
    /// Each server as `HOST:PORT`, with `?transport=tcp` for TCP (`"turn"`).
    public var servers: [String]
    /// Seconds each set of credentials lasts (`"turnLifetime"`).
    public var lifetime: UInt32

    /// Makes an offer. Cost: none.
    public init(servers: [String], lifetime: UInt32) {
        self.servers = servers
        self.lifetime = lifetime
    }
}

/// The reply to a command that succeeded: `"event":"ok"`, the command's `cmd` and `id`, and what
/// the command returns (`result`, its fields written beside `cmd`).
/// Thread rule: a value type. Cost: that of its result.
public struct NodeReply: Sendable, Equatable {
    /// The command's wire name (`NodeCommandLine.name(of:)`); it picks how `result` is read back.
    public var cmd: String
    /// The command's `"id"`, when it had one.
    public var id: NodeCommandID?
    /// The command's fields.
    public var result: NodeResult

    /// Makes a reply. Cost: none.
    public init(cmd: String, id: NodeCommandID? = nil, result: NodeResult = .empty) {
        self.cmd = cmd
        self.id = id
        self.result = result
    }
}

/// What a command returns in its `ok` reply. Which case a reply holds follows from its `cmd`
/// (listed with each case): reading a line back picks the case by `cmd`, so a reply whose `cmd`
/// is no command does not read.
/// Thread rule: a value type. Cost: its contents.
public enum NodeResult: Sendable, Equatable {
    /// No fields: `set-name`, `set-status-message`, `set-status`, `hangup`, `mute-request`, `mic`,
    /// `camera`, `subscribe`, `join-link`, `revoke-link`, `quit`.
    case empty
    /// `address`: the own address, ID, port and nospam.
    case identity(address: String, revueId: String, port: UInt16, nospam: UInt32)
    /// `add-friend`, `accept`, `delete`, `invite`, `accept-call`, `reject-call`, `cancel-call`: the friend.
    case friend(friendId: String)
    /// `set-nospam`: the new address.
    case address(String)
    /// `message`: confirmed by the friend's device; `messageId` is the SDK's message ID.
    case messageSent(friendId: String, messageId: UInt32)
    /// `list`: every friend (`"friends"`).
    case friends([NodeFriend])
    /// `counters`: the session layer's counters, as fields of the reply.
    case counters(NodeCounters)
    /// `call-message`: per recipient (friend ID), `delivered` or the `FriendMessageError` case name.
    case callMessage(results: [String: String])
    /// `mute`, `unmute`: the track.
    case track(sid: String)
    /// `mode`: the new mode.
    case mode(ParticipantMode)
    /// `feed`, once done: video frames and audio samples captured, and the most milliseconds the
    /// feed fell behind its schedule.
    case feed(videoFramesFed: Int, audioSamplesFed: Int, maxLagMilliseconds: Int)
    /// `media-stats`: media received per participant and sent by this peer, as fields of the reply.
    case mediaStats(NodeMediaStats)
    /// `room`: participants, tracks and modes, as fields of the reply.
    case room(NodeRoomState)
    /// `create-link`: the link's text (`"link"`), secret included: whoever reads it can join.
    case link(String)

    /// The case a reply to the command named `cmd` holds (`.empty` for the commands without
    /// fields); nil for a name that is no command. Cost: a string switch.
    static func resultKind(cmd: String) -> Kind? {
        switch cmd {
        case "set-name", "set-status-message", "set-status", "hangup", "mute-request", "mic", "camera", "subscribe", "quit",
            "join-link", "revoke-link":
            .empty
        case "create-link": .link
        case "address": .identity
        case "add-friend", "accept", "delete", "invite", "accept-call", "reject-call", "cancel-call": .friend
        case "set-nospam": .address
        case "message": .messageSent
        case "list": .friends
        case "counters": .counters
        case "call-message": .callMessage
        case "mute", "unmute": .track
        case "mode": .mode
        case "feed": .feed
        case "media-stats": .mediaStats
        case "room": .room
        default: nil
        }
    }

    /// The cases without their values, for `resultKind(cmd:)`.
    enum Kind {
        case empty, identity, friend, address, messageSent, friends, counters, callMessage, track, mode, feed, mediaStats,
            room, link
    }
}

/// The reply to a command that failed, or to a line that is no valid command: `"event":"error"`,
/// the error's name, and the fields some errors add.
/// Thread rule: a value type. Cost: none beyond its strings.
public struct NodeErrorReply: Sendable, Equatable {
    /// The command's wire name; nil for a line that is not a JSON object with a `"cmd"` string.
    public var cmd: String?
    /// The command's `"id"`, when it had one.
    public var id: NodeCommandID?
    /// The error's name: the SDK error's case name (`alreadyExists`, `friendNotReachable`, ...),
    /// `notFound`, `failed`, `notInCall`, `notPublished`, or a line's (`invalidCommand`,
    /// `unknownCommand`, `missingField`, `invalidStatus`, `invalidMode`).
    public var error: String
    /// The friend the command was about (`message`, the call commands, `hangup`'s `notInCall`).
    public var friendId: String?
    /// The message that timed out (`timeout` of `message`).
    public var messageId: UInt32?
    /// The track that is not published (`notPublished` of `mute` and `unmute`).
    public var sid: String?
    /// `-1` with `failed`.
    public var code: Int?
    /// What went wrong, in words (`failed`, `invalidCommand`).
    public var detail: String?
    /// The missing field (`missingField`).
    public var field: String?

    /// Makes an error reply. Cost: none.
    public init(
        cmd: String? = nil, id: NodeCommandID? = nil, error: String, friendId: String? = nil, messageId: UInt32? = nil,
        sid: String? = nil, code: Int? = nil, detail: String? = nil, field: String? = nil
    ) {
        self.cmd = cmd
        self.id = id
        self.error = error
        self.friendId = friendId
        self.messageId = messageId
        self.sid = sid
        self.code = code
        self.detail = detail
        self.field = field
    }
}

/// The participant a room event is about: its identity (a friend ID, or your own `revueId`) and
/// whether it is you (`"friendId"`, `"isLocal"`).
/// Thread rule: a value type. Cost: none.
public struct NodeParticipant: Sendable, Equatable {
    /// The participant's identity.
    public var friendId: String
    /// Whether it is the local participant.
    public var isLocal: Bool

    /// Makes a participant reference. Cost: none.
    public init(friendId: String, isLocal: Bool) {
        self.friendId = friendId
        self.isLocal = isLocal
    }
}

/// A `RoomDelegate` event, named after the method (`name`), with the participant it is about.
/// Thread rule: a value type. Cost: none beyond its strings.
public enum NodeRoomEvent: Sendable, Equatable {
    /// A remote participant joined the call, in `mode`.
    case participantDidConnect(NodeParticipant, mode: ParticipantMode)
    /// A remote participant left; `reason` is written by its case name (`null` when unknown).
    case participantDidDisconnect(NodeParticipant, reason: DisconnectReason?)
    /// The call started.
    case roomDidStartCall
    /// The call ended.
    case roomDidEndCall
    /// The call failed: `"error":"connectionLost"`, or `"mediaSetupFailed"` with `friendId` and
    /// `detail` (no `isLocal`).
    case callDidFailWithError(CallError)
    /// One of your tracks could not be published: `kind`, `"error":"mediaSetupFailed"`, `detail`.
    case didFailToPublishTrack(NodeParticipant, kind: TrackKind, error: TrackPublishError)
    /// A participant's connection quality changed (`unknown`, `poor`, `good`, `excellent`).
    case didUpdateConnectionQuality(NodeParticipant, quality: ConnectionQuality)
    /// A participant's name changed (`null` when it has none).
    case didUpdateName(NodeParticipant, name: String?)
    /// A participant's status message changed (`null` when it has none).
    case didUpdateStatusMessage(NodeParticipant, statusMessage: String?)
    /// A participant's status changed (`none`, `away`, `busy`).
    case didUpdateStatus(NodeParticipant, status: UserStatus)
    /// You published a track.
    case didPublishTrack(NodeParticipant, sid: String, kind: TrackKind)
    /// You unpublished a track.
    case didUnpublishTrack(NodeParticipant, sid: String, kind: TrackKind)
    /// You subscribed to a remote participant's track.
    case didSubscribeTrack(NodeParticipant, sid: String, kind: TrackKind)
    /// You unsubscribed from a remote participant's track.
    case didUnsubscribeTrack(NodeParticipant, sid: String, kind: TrackKind)
    /// A track of a participant was muted or unmuted.
    case didUpdateIsMuted(NodeParticipant, sid: String, isMuted: Bool)
    /// A call message from a participant.
    case didReceiveMessage(NodeParticipant, message: String)
    /// A participant asks you to mute (`isMuted` true) or unmute.
    case didReceiveMuteRequest(NodeParticipant, isMuted: Bool)
    /// The speaking participants changed: their identities, loudest first.
    case didUpdateSpeakingParticipants(speakers: [String])
    /// A participant's mode changed.
    case didUpdateMode(NodeParticipant, mode: ParticipantMode)

    /// The `"event"` value: the `RoomDelegate` method's name. Cost: none.
    public var name: String {
        switch self {
        case .participantDidConnect: "participantDidConnect"
        case .participantDidDisconnect: "participantDidDisconnect"
        case .roomDidStartCall: "roomDidStartCall"
        case .roomDidEndCall: "roomDidEndCall"
        case .callDidFailWithError: "callDidFailWithError"
        case .didFailToPublishTrack: "didFailToPublishTrack"
        case .didUpdateConnectionQuality: "didUpdateConnectionQuality"
        case .didUpdateName: "didUpdateName"
        case .didUpdateStatusMessage: "didUpdateStatusMessage"
        case .didUpdateStatus: "didUpdateStatus"
        case .didPublishTrack: "didPublishTrack"
        case .didUnpublishTrack: "didUnpublishTrack"
        case .didSubscribeTrack: "didSubscribeTrack"
        case .didUnsubscribeTrack: "didUnsubscribeTrack"
        case .didUpdateIsMuted: "didUpdateIsMuted"
        case .didReceiveMessage: "didReceiveMessage"
        case .didReceiveMuteRequest: "didReceiveMuteRequest"
        case .didUpdateSpeakingParticipants: "didUpdateSpeakingParticipants"
        case .didUpdateMode: "didUpdateMode"
        }
    }

    /// The participant the event is about; nil for the events about the call as a whole.
    /// Cost: none.
    public var participant: NodeParticipant? {
        switch self {
        case .roomDidStartCall, .roomDidEndCall, .callDidFailWithError, .didUpdateSpeakingParticipants: nil
        case .participantDidConnect(let p, _), .participantDidDisconnect(let p, _), .didFailToPublishTrack(let p, _, _),
            .didUpdateConnectionQuality(let p, _), .didUpdateName(let p, _), .didUpdateStatusMessage(let p, _),
            .didUpdateStatus(let p, _), .didPublishTrack(let p, _, _), .didUnpublishTrack(let p, _, _),
            .didSubscribeTrack(let p, _, _), .didUnsubscribeTrack(let p, _, _), .didUpdateIsMuted(let p, _, _),
            .didReceiveMessage(let p, _), .didReceiveMuteRequest(let p, _), .didUpdateMode(let p, _):
            p
        }
    }
}

/// One path to a friend in `didUpdatePaths` and `list`: `kind`, `endpoint`, and `rtt` in seconds
/// (rounded to microseconds; absent until measured).
/// Thread rule: a value type. Cost: none beyond its string.
public struct NodePath: Sendable, Equatable {
    /// How packets travel (`directLAN`, `directUDP`, `relayed`).
    public var kind: FriendConnectionPath.Kind
    /// The friend's (or the relay's) address, `ip:port`.
    public var endpoint: String
    /// The last round-trip time in seconds, nil until measured.
    public var rtt: Double?

    /// Makes a path. Cost: none.
    public init(kind: FriendConnectionPath.Kind, endpoint: String, rtt: Double? = nil) {
        self.kind = kind
        self.endpoint = endpoint
        self.rtt = rtt
    }

    /// The path as revue-node reports it: the round-trip time rounded to microseconds.
    /// Cost: none.
    public init(_ path: FriendConnectionPath) {
        self.init(
            kind: path.kind, endpoint: path.endpoint, rtt: path.roundTripTime.map { ($0 * 1e6).rounded() / 1e6 })
    }
}

/// One friend in the `list` reply.
/// Thread rule: a value type. Cost: none beyond its strings.
public struct NodeFriend: Sendable, Equatable {
    /// The friend's ID.
    public var friendId: String
    /// The friend's name.
    public var name: String
    /// The friend's status message.
    public var statusMessage: String
    /// The friend's status (`none`, `away`, `busy`).
    public var status: UserStatus
    /// Whether a path to the friend works now.
    public var isOnline: Bool
    /// Every path to the friend.
    public var paths: [NodePath]
    /// What the rendezvous nodes last heard (`offline`, `online`, `away`, `busy`).
    public var presence: PresenceStatus

    /// Makes a friend entry. Cost: none.
    public init(
        friendId: String, name: String, statusMessage: String, status: UserStatus, isOnline: Bool, paths: [NodePath],
        presence: PresenceStatus
    ) {
        self.friendId = friendId
        self.name = name
        self.statusMessage = statusMessage
        self.status = status
        self.isOnline = isOnline
        self.paths = paths
        self.presence = presence
    }
}

/// The `counters` reply's fields: `RevueCounters` as revue-node reports them (all but
/// `linkFailures`), each under its property name.
/// Thread rule: a value type. Cost: none.
public struct NodeCounters: Sendable, Equatable, Codable {
    /// `RevueCounters.droppedMalformed`.
    public var droppedMalformed: Int
    /// `RevueCounters.droppedForged`.
    public var droppedForged: Int
    /// `RevueCounters.droppedReplayed`.
    public var droppedReplayed: Int
    /// `RevueCounters.droppedUnknownSession`.
    public var droppedUnknownSession: Int
    /// `RevueCounters.droppedNonFriend`.
    public var droppedNonFriend: Int
    /// `RevueCounters.droppedWrongNospam`.
    public var droppedWrongNospam: Int
    /// `RevueCounters.droppedRateLimited`.
    public var droppedRateLimited: Int
    /// `RevueCounters.friendRequestsReceived`.
    public var friendRequestsReceived: Int
    /// `RevueCounters.duplicatesSuppressed`.
    public var duplicatesSuppressed: Int
    /// `RevueCounters.reservedMessagesSwallowed`.
    public var reservedMessagesSwallowed: Int
    /// `RevueCounters.handshakesCompleted`.
    public var handshakesCompleted: Int
    /// `RevueCounters.droppedAnnounces`.
    public var droppedAnnounces: Int
    /// `RevueCounters.initiationsThrottled`.
    public var initiationsThrottled: Int
    /// `RevueCounters.candidatesDropped`.
    public var candidatesDropped: Int
    /// `RevueCounters.cookieRepliesSent`.
    public var cookieRepliesSent: Int
    /// `RevueCounters.droppedExpired`.
    public var droppedExpired: Int
    /// `RevueCounters.droppedLookupReplies`.
    public var droppedLookupReplies: Int
    /// `RevueCounters.droppedOverload`.
    public var droppedOverload: Int
    /// `RevueCounters.turnCredentialsRequested`.
    public var turnCredentialsRequested: Int
    /// `RevueCounters.turnCredentialsReceived`.
    public var turnCredentialsReceived: Int
    /// `RevueCounters.requestsForgotten`.
    public var requestsForgotten: Int
    /// `RevueCounters.callSignalsRefused`.
    public var callSignalsRefused: Int

    /// The counters revue-node reports, copied from `counters`. Cost: none.
    public init(_ counters: RevueCounters) {
        droppedMalformed = counters.droppedMalformed
        droppedForged = counters.droppedForged
        droppedReplayed = counters.droppedReplayed
        droppedUnknownSession = counters.droppedUnknownSession
        droppedNonFriend = counters.droppedNonFriend
        droppedWrongNospam = counters.droppedWrongNospam
        droppedRateLimited = counters.droppedRateLimited
        friendRequestsReceived = counters.friendRequestsReceived
        duplicatesSuppressed = counters.duplicatesSuppressed
        reservedMessagesSwallowed = counters.reservedMessagesSwallowed
        handshakesCompleted = counters.handshakesCompleted
        droppedAnnounces = counters.droppedAnnounces
        initiationsThrottled = counters.initiationsThrottled
        candidatesDropped = counters.candidatesDropped
        cookieRepliesSent = counters.cookieRepliesSent
        droppedExpired = counters.droppedExpired
        droppedLookupReplies = counters.droppedLookupReplies
        droppedOverload = counters.droppedOverload
        turnCredentialsRequested = counters.turnCredentialsRequested
        turnCredentialsReceived = counters.turnCredentialsReceived
        requestsForgotten = counters.requestsForgotten
        callSignalsRefused = counters.callSignalsRefused
    }
}

/// The `media-stats` reply's fields.
/// Thread rule: a value type. Cost: its arrays.
public struct NodeMediaStats: Sendable, Equatable {
    /// What arrived from each remote participant, by friend ID.
    public var participants: [NodeMediaParticipant]
    /// Media bytes this peer has sent in the call.
    public var uplinkBytes: Int
    /// The video send stream's counters; nil (absent) without a video track.
    public var videoSend: NodeVideoSend?

    /// Makes the stats. Cost: none.
    public init(participants: [NodeMediaParticipant], uplinkBytes: Int, videoSend: NodeVideoSend? = nil) {
        self.participants = participants
        self.uplinkBytes = uplinkBytes
        self.videoSend = videoSend
    }
}

/// One remote participant in `media-stats`: decoded video frames and PCM samples received from
/// it, and the call leg's path.
/// Thread rule: a value type. Cost: none beyond its path.
public struct NodeMediaParticipant: Sendable, Equatable {
    /// The participant's friend ID.
    public var friendId: String
    /// Video frames decoded.
    public var videoFrames: Int
    /// PCM samples played.
    public var audioSamples: Int
    /// PCM samples in played chunks whose peak was above 1000.
    public var loudSamples: Int
    /// The call leg's ICE or SFU state; nil (`null`) without a leg to that participant.
    public var path: NodeMediaPath?

    /// Makes an entry. Cost: none.
    public init(friendId: String, videoFrames: Int, audioSamples: Int, loudSamples: Int, path: NodeMediaPath?) {
        self.friendId = friendId
        self.videoFrames = videoFrames
        self.audioSamples = audioSamples
        self.loudSamples = loudSamples
        self.path = path
    }
}

/// The `path` of a `media-stats` participant: diagnostics of the call leg (the selected ICE pair,
/// route, candidates and check counters; through an SFU, the subscription), a JSON object whose
/// fields follow the engine's diagnostics (docs/revue-node.md) and are kept as read.
/// Thread rule: a value type. Cost: its JSON tree.
public struct NodeMediaPath: Sendable, Equatable, Codable {
    /// The object's fields.
    package var fields: [String: JSONValue]

    /// Wraps the fields. Cost: none.
    package init(_ fields: [String: JSONValue]) { self.fields = fields }

    /// Reads a JSON object. Cost: recursive.
    public init(from decoder: any Decoder) throws { fields = try [String: JSONValue](from: decoder) }

    /// Writes the JSON object. Cost: recursive.
    public func encode(to encoder: any Encoder) throws { try fields.encode(to: encoder) }

    /// The object as one line of JSON text, keys sorted, as it appears in the reply (for a
    /// program outside this package, which reads it with its own JSON reader).
    /// Cost: one `JSONEncoder` run.
    public var text: String { JSONValue.object(fields).sortedLine ?? "{}" }
}

/// The `videoSend` object of `media-stats`: what our video send stream has done since the track
/// was published.
/// Thread rule: a value type. Cost: none.
public struct NodeVideoSend: Sendable, Equatable, Codable {
    /// Frames the capturer took.
    public var captured: Int
    /// Frames dropped because the capture ring was full.
    public var droppedRingFull: Int
    /// Frames dropped because no pooled buffer was free.
    public var droppedPoolExhausted: Int
    /// Frames dropped to hold the frame rate.
    public var droppedFrameRate: Int
    /// Frames the encoder produced.
    public var framesEncoded: Int
    /// Frames the encoder dropped.
    public var framesDroppedByEncoder: Int
    /// The encoder's target bitrate, bit/s.
    public var targetBitrate: Int
    /// Times the pacer's queue overflowed.
    public var pacerOverflows: Int

    /// Makes the counters. Cost: none.
    public init(
        captured: Int, droppedRingFull: Int, droppedPoolExhausted: Int, droppedFrameRate: Int, framesEncoded: Int,
        framesDroppedByEncoder: Int, targetBitrate: Int, pacerOverflows: Int
    ) {
        self.captured = captured
        self.droppedRingFull = droppedRingFull
        self.droppedPoolExhausted = droppedPoolExhausted
        self.droppedFrameRate = droppedFrameRate
        self.framesEncoded = framesEncoded
        self.framesDroppedByEncoder = framesDroppedByEncoder
        self.targetBitrate = targetBitrate
        self.pacerOverflows = pacerOverflows
    }
}

/// The `room` reply's fields.
/// Thread rule: a value type. Cost: its arrays.
public struct NodeRoomState: Sendable, Equatable {
    /// The remote participants, by identity.
    public var participants: [NodeRoomParticipant]
    /// Your own mode.
    public var mode: ParticipantMode
    /// Your own tracks, by `sid`.
    public var tracks: [NodeTrack]
    /// The identities of the speaking participants, loudest first.
    public var activeSpeakers: [String]

    /// Makes the room state. Cost: none.
    public init(participants: [NodeRoomParticipant], mode: ParticipantMode, tracks: [NodeTrack], activeSpeakers: [String]) {
        self.participants = participants
        self.mode = mode
        self.tracks = tracks
        self.activeSpeakers = activeSpeakers
    }
}

/// One remote participant in the `room` reply.
/// Thread rule: a value type. Cost: its strings and tracks.
public struct NodeRoomParticipant: Sendable, Equatable {
    /// The participant's friend ID.
    public var friendId: String
    /// Its name, nil (`null`) when it has none.
    public var name: String?
    /// Its mode.
    public var mode: ParticipantMode
    /// Its tracks, by `sid`.
    public var tracks: [NodeTrack]
    /// How well media reaches it.
    public var connectionQuality: ConnectionQuality
    /// Whether it speaks now.
    public var isSpeaking: Bool
    /// Whether it is in a room joined by link (`"byLink":true`, absent otherwise; its `friendId`
    /// is then its link identity, and its `name` the display name it gave).
    public var byLink: Bool

    /// Makes an entry. Cost: none.
    public init(
        friendId: String, name: String?, mode: ParticipantMode, tracks: [NodeTrack], connectionQuality: ConnectionQuality,
        isSpeaking: Bool, byLink: Bool = false
    ) {
        self.friendId = friendId
        self.name = name
        self.mode = mode
        self.tracks = tracks
        self.connectionQuality = connectionQuality
        self.isSpeaking = isSpeaking
        self.byLink = byLink
    }
}

/// One track in the `room` reply.
/// Thread rule: a value type. Cost: none beyond its string.
public struct NodeTrack: Sendable, Equatable {
    /// The track's ID.
    public var sid: String
    /// `audio` or `video`.
    public var kind: TrackKind
    /// Whether it is muted.
    public var isMuted: Bool
    /// For a remote track, whether you subscribe to it; nil (absent) for your own.
    public var isSubscribed: Bool?

    /// Makes a track entry. Cost: none.
    public init(sid: String, kind: TrackKind, isMuted: Bool, isSubscribed: Bool? = nil) {
        self.sid = sid
        self.kind = kind
        self.isMuted = isMuted
        self.isSubscribed = isSubscribed
    }
}

// MARK: - Names of the SDK's enums on the wire

/// An SDK enum revue-node writes as a string: its case name (a raw value where it has one).
/// Thread rule: value types. Cost: a switch, or a scan of a few cases to read one back.
package protocol NodeWireName: Sendable, Equatable {
    /// The string written for the value.
    var wireName: String { get }
    /// Every value, to read a string back.
    static var wireCases: [Self] { get }
}

extension NodeWireName {
    /// The value written as `wireName`, nil for any other string. Cost: a scan of `wireCases`.
    package init?(wireName: String) {
        guard let value = Self.wireCases.first(where: { $0.wireName == wireName }) else { return nil }
        self = value
    }
}

extension UserStatus: NodeWireName {
    /// `none`, `away` or `busy`.
    package var wireName: String {
        switch self {
        case .none: "none"
        case .away: "away"
        case .busy: "busy"
        }
    }
    /// Every status.
    package static var wireCases: [UserStatus] { allCases }
}

extension PresenceStatus: NodeWireName {
    /// `offline`, `online`, `away` or `busy`.
    package var wireName: String {
        switch self {
        case .offline: "offline"
        case .online: "online"
        case .away: "away"
        case .busy: "busy"
        }
    }
    /// Every presence.
    package static var wireCases: [PresenceStatus] { [.offline, .online, .away, .busy] }
}

extension InvitationEndReason: NodeWireName {
    /// The case name.
    package var wireName: String {
        switch self {
        case .cancelled: "cancelled"
        case .rejected: "rejected"
        case .timeout: "timeout"
        case .finished: "finished"
        }
    }
    /// Every reason.
    package static var wireCases: [InvitationEndReason] { [.cancelled, .rejected, .timeout, .finished] }
}

extension DisconnectReason: NodeWireName {
    /// The case name.
    package var wireName: String {
        switch self {
        case .localHangUp: "localHangUp"
        case .remoteHangUp: "remoteHangUp"
        case .friendDeleted: "friendDeleted"
        case .connectionLost: "connectionLost"
        case .destroyed: "destroyed"
        }
    }
    /// Every reason.
    package static var wireCases: [DisconnectReason] {
        [.localHangUp, .remoteHangUp, .friendDeleted, .connectionLost, .destroyed]
    }
}

extension ConnectionQuality: NodeWireName {
    /// The case name (not the raw value).
    package var wireName: String {
        switch self {
        case .unknown: "unknown"
        case .poor: "poor"
        case .good: "good"
        case .excellent: "excellent"
        }
    }
    /// Every quality.
    package static var wireCases: [ConnectionQuality] { [.unknown, .poor, .good, .excellent] }
}

extension ParticipantMode: NodeWireName {
    /// The raw value.
    package var wireName: String { rawValue }
    /// Every mode.
    package static var wireCases: [ParticipantMode] { allCases }
}

extension TrackKind: NodeWireName {
    /// The raw value (`audio`, `video`).
    package var wireName: String { rawValue }
    /// Both kinds.
    package static var wireCases: [TrackKind] { [.audio, .video] }
}

extension FriendConnectionPath.Kind: NodeWireName {
    /// `directLAN`, `directUDP` or `relayed`.
    package var wireName: String {
        switch self {
        case .directLAN: "directLAN"
        case .directUDP: "directUDP"
        case .relayed: "relayed"
        }
    }
    /// Every kind.
    package static var wireCases: [FriendConnectionPath.Kind] { [.directLAN, .directUDP, .relayed] }
}

extension KeyedEncodingContainer {
    /// Writes an SDK enum by its wire name.
    mutating func encode(name value: some NodeWireName, forKey key: Key) throws {
        try encode(value.wireName, forKey: key)
    }

    /// Writes a value, or `null` for nil (where synthesized code would leave the key out).
    mutating func encodeNullable(_ value: (some Encodable)?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
}

extension KeyedDecodingContainer {
    /// Reads an SDK enum by its wire name; another string is a `DecodingError`.
    func decode<T: NodeWireName>(name type: T.Type, forKey key: Key) throws -> T {
        let text = try decode(String.self, forKey: key)
        guard let value = T(wireName: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "no \(T.self) is named \(text)")
        }
        return value
    }
}

// MARK: - Coding

extension NodeEvent: Codable {
    /// Every key an event line can have at its top level (the nested objects have their own;
    /// `counters`, `media-stats` and `room` write their result's keys beside these).
    enum Field: String, CodingKey {
        case event, layer, mode, port, address, revueId, lan, turn, turnLifetime
        case cmd, id, error, friendId, messageId, sid, code, detail, field
        case message, name, statusMessage, status, isOnline, paths, isDiscoverable, reason
        case isLocal, quality, kind, isMuted, speakers
        case nospam, friends, results, videoFramesFed, audioSamplesFed, maxLagMilliseconds
        case link
    }

    /// Writes the event object: `event`, then its fields (and `"layer":"room"` for a room event).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(name, forKey: .event)
        switch self {
        case .ready(.peer(let address, let revueId, let port, let lan)):
            try c.encode("peer", forKey: .mode)
            try c.encode(address, forKey: .address)
            try c.encode(revueId, forKey: .revueId)
            try c.encode(port, forKey: .port)
            try c.encode(lan, forKey: .lan)
        case .ready(.rendezvous(let port, let turn)):
            try c.encode("rendezvous", forKey: .mode)
            try c.encode(port, forKey: .port)
            if let turn {
                try c.encode(turn.servers, forKey: .turn)
                try c.encode(turn.lifetime, forKey: .turnLifetime)
            }
        case .ok(let reply): try reply.encode(into: &c, encoder: encoder)
        case .error(let e):
            try c.encodeIfPresent(e.cmd, forKey: .cmd)
            try c.encodeIfPresent(e.id, forKey: .id)
            try c.encode(e.error, forKey: .error)
            try c.encodeIfPresent(e.friendId, forKey: .friendId)
            try c.encodeIfPresent(e.messageId, forKey: .messageId)
            try c.encodeIfPresent(e.sid, forKey: .sid)
            try c.encodeIfPresent(e.code, forKey: .code)
            try c.encodeIfPresent(e.detail, forKey: .detail)
            try c.encodeIfPresent(e.field, forKey: .field)
        case .didReceiveFriendRequest(let friendId, let message), .didReceiveMessage(let friendId, let message):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(message, forKey: .message)
        case .didUpdateName(let friendId, let name):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(name, forKey: .name)
        case .didUpdateStatusMessage(let friendId, let statusMessage):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(statusMessage, forKey: .statusMessage)
        case .didUpdateStatus(let friendId, let status):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(name: status, forKey: .status)
        case .didUpdatePaths(let friendId, let isOnline, let paths):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(isOnline, forKey: .isOnline)
            try c.encode(paths, forKey: .paths)
        case .didUpdateIsDiscoverable(let isDiscoverable): try c.encode(isDiscoverable, forKey: .isDiscoverable)
        case .didSendInvitation(let friendId, let message), .didReceiveInvitation(let friendId, let message):
            try c.encode(friendId, forKey: .friendId)
            try c.encodeNullable(message, forKey: .message)
        case .didEndInvitation(let friendId, let reason):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(name: reason, forKey: .reason)
        case .room(let e): try e.encode(into: &c)
        }
    }

    /// Reads an event object by its `event` (and `layer`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        let event = try c.decode(String.self, forKey: .event)
        if let layer = try c.decodeIfPresent(String.self, forKey: .layer) {
            guard layer == "room" else {
                throw DecodingError.dataCorruptedError(forKey: .layer, in: c, debugDescription: "no layer is named \(layer)")
            }
            self = .room(try NodeRoomEvent(event: event, from: c))
            return
        }
        func friendId() throws -> String { try c.decode(String.self, forKey: .friendId) }
        switch event {
        case "ready":
            switch try c.decode(String.self, forKey: .mode) {
            case "peer":
                self = .ready(
                    .peer(
                        address: try c.decode(String.self, forKey: .address),
                        revueId: try c.decode(String.self, forKey: .revueId), port: try c.decode(UInt16.self, forKey: .port),
                        lan: try c.decode(Bool.self, forKey: .lan)))
            case "rendezvous":
                let servers = try c.decodeIfPresent([String].self, forKey: .turn)
                let lifetime = try c.decodeIfPresent(UInt32.self, forKey: .turnLifetime)
                guard (servers == nil) == (lifetime == nil) else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .turn, in: c, debugDescription: "turn and turnLifetime come together")
                }
                let offer = servers.flatMap { s in lifetime.map { NodeTURNOffer(servers: s, lifetime: $0) } }
                self = .ready(.rendezvous(port: try c.decode(UInt16.self, forKey: .port), turn: offer))
            case let mode:
                throw DecodingError.dataCorruptedError(forKey: .mode, in: c, debugDescription: "no ready mode \(mode)")
            }
        case "ok": self = .ok(try NodeReply(from: c, decoder: decoder))
        case "error":
            self = .error(
                NodeErrorReply(
                    cmd: try c.decodeIfPresent(String.self, forKey: .cmd),
                    id: try c.decodeIfPresent(NodeCommandID.self, forKey: .id),
                    error: try c.decode(String.self, forKey: .error),
                    friendId: try c.decodeIfPresent(String.self, forKey: .friendId),
                    messageId: try c.decodeIfPresent(UInt32.self, forKey: .messageId),
                    sid: try c.decodeIfPresent(String.self, forKey: .sid), code: try c.decodeIfPresent(Int.self, forKey: .code),
                    detail: try c.decodeIfPresent(String.self, forKey: .detail),
                    field: try c.decodeIfPresent(String.self, forKey: .field)))
        case "didReceiveFriendRequest":
            self = .didReceiveFriendRequest(friendId: try friendId(), message: try c.decode(String.self, forKey: .message))
        case "didUpdateName": self = .didUpdateName(friendId: try friendId(), name: try c.decode(String.self, forKey: .name))
        case "didUpdateStatusMessage":
            self = .didUpdateStatusMessage(
                friendId: try friendId(), statusMessage: try c.decode(String.self, forKey: .statusMessage))
        case "didUpdateStatus":
            self = .didUpdateStatus(friendId: try friendId(), status: try c.decode(name: UserStatus.self, forKey: .status))
        case "didUpdatePaths":
            self = .didUpdatePaths(
                friendId: try friendId(), isOnline: try c.decode(Bool.self, forKey: .isOnline),
                paths: try c.decode([NodePath].self, forKey: .paths))
        case "didReceiveMessage":
            self = .didReceiveMessage(friendId: try friendId(), message: try c.decode(String.self, forKey: .message))
        case "didUpdateIsDiscoverable":
            self = .didUpdateIsDiscoverable(isDiscoverable: try c.decode(Bool.self, forKey: .isDiscoverable))
        case "didSendInvitation":
            self = .didSendInvitation(friendId: try friendId(), message: try c.decodeIfPresent(String.self, forKey: .message))
        case "didReceiveInvitation":
            self = .didReceiveInvitation(friendId: try friendId(), message: try c.decodeIfPresent(String.self, forKey: .message))
        case "didEndInvitation":
            self = .didEndInvitation(
                friendId: try friendId(), reason: try c.decode(name: InvitationEndReason.self, forKey: .reason))
        default:
            throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "no event is named \(event)")
        }
    }
}

extension NodeReply {
    /// Writes `cmd`, `id` and the result's fields into the event object.
    func encode(into c: inout KeyedEncodingContainer<NodeEvent.Field>, encoder: any Encoder) throws {
        try c.encode(cmd, forKey: .cmd)
        try c.encodeIfPresent(id, forKey: .id)
        switch result {
        case .empty: break
        case .identity(let address, let revueId, let port, let nospam):
            try c.encode(address, forKey: .address)
            try c.encode(revueId, forKey: .revueId)
            try c.encode(port, forKey: .port)
            try c.encode(nospam, forKey: .nospam)
        case .friend(let friendId): try c.encode(friendId, forKey: .friendId)
        case .address(let address): try c.encode(address, forKey: .address)
        case .messageSent(let friendId, let messageId):
            try c.encode(friendId, forKey: .friendId)
            try c.encode(messageId, forKey: .messageId)
        case .friends(let friends): try c.encode(friends, forKey: .friends)
        case .counters(let counters): try counters.encode(to: encoder)
        case .callMessage(let results): try c.encode(results, forKey: .results)
        case .track(let sid): try c.encode(sid, forKey: .sid)
        case .mode(let mode): try c.encode(name: mode, forKey: .mode)
        case .feed(let frames, let samples, let lag):
            try c.encode(frames, forKey: .videoFramesFed)
            try c.encode(samples, forKey: .audioSamplesFed)
            try c.encode(lag, forKey: .maxLagMilliseconds)
        case .mediaStats(let stats): try stats.encode(to: encoder)
        case .room(let room): try room.encode(to: encoder)
        case .link(let link): try c.encode(link, forKey: .link)
        }
    }

    /// Reads `cmd`, `id` and the result `cmd` has from the event object.
    init(from c: KeyedDecodingContainer<NodeEvent.Field>, decoder: any Decoder) throws {
        let cmd = try c.decode(String.self, forKey: .cmd)
        guard let kind = NodeResult.resultKind(cmd: cmd) else {
            throw DecodingError.dataCorruptedError(forKey: .cmd, in: c, debugDescription: "no command is named \(cmd)")
        }
        let result: NodeResult
        switch kind {
        case .empty: result = .empty
        case .identity:
            result = .identity(
                address: try c.decode(String.self, forKey: .address), revueId: try c.decode(String.self, forKey: .revueId),
                port: try c.decode(UInt16.self, forKey: .port), nospam: try c.decode(UInt32.self, forKey: .nospam))
        case .friend: result = .friend(friendId: try c.decode(String.self, forKey: .friendId))
        case .address: result = .address(try c.decode(String.self, forKey: .address))
        case .messageSent:
            result = .messageSent(
                friendId: try c.decode(String.self, forKey: .friendId), messageId: try c.decode(UInt32.self, forKey: .messageId))
        case .friends: result = .friends(try c.decode([NodeFriend].self, forKey: .friends))
        case .counters: result = .counters(try NodeCounters(from: decoder))
        case .callMessage: result = .callMessage(results: try c.decode([String: String].self, forKey: .results))
        case .track: result = .track(sid: try c.decode(String.self, forKey: .sid))
        case .mode: result = .mode(try c.decode(name: ParticipantMode.self, forKey: .mode))
        case .feed:
            result = .feed(
                videoFramesFed: try c.decode(Int.self, forKey: .videoFramesFed),
                audioSamplesFed: try c.decode(Int.self, forKey: .audioSamplesFed),
                maxLagMilliseconds: try c.decode(Int.self, forKey: .maxLagMilliseconds))
        case .mediaStats: result = .mediaStats(try NodeMediaStats(from: decoder))
        case .room: result = .room(try NodeRoomState(from: decoder))
        case .link: result = .link(try c.decode(String.self, forKey: .link))
        }
        self.init(cmd: cmd, id: try c.decodeIfPresent(NodeCommandID.self, forKey: .id), result: result)
    }
}

extension NodeRoomEvent {
    /// Writes `"layer":"room"`, the participant (`friendId`, `isLocal`) and the event's fields.
    func encode(into c: inout KeyedEncodingContainer<NodeEvent.Field>) throws {
        try c.encode("room", forKey: .layer)
        if let p = participant {
            try c.encode(p.friendId, forKey: .friendId)
            try c.encode(p.isLocal, forKey: .isLocal)
        }
        switch self {
        case .roomDidStartCall, .roomDidEndCall: break
        case .participantDidConnect(_, let mode), .didUpdateMode(_, let mode): try c.encode(name: mode, forKey: .mode)
        case .participantDidDisconnect(_, let reason): try c.encodeNullable(reason?.wireName, forKey: .reason)
        case .callDidFailWithError(.connectionLost): try c.encode("connectionLost", forKey: .error)
        case .callDidFailWithError(.mediaSetupFailed(let friendId, let detail)):
            try c.encode("mediaSetupFailed", forKey: .error)
            try c.encode(friendId, forKey: .friendId)
            try c.encode(detail, forKey: .detail)
        case .didFailToPublishTrack(_, let kind, .mediaSetupFailed(let detail)):
            try c.encode(name: kind, forKey: .kind)
            try c.encode("mediaSetupFailed", forKey: .error)
            try c.encode(detail, forKey: .detail)
        case .didUpdateConnectionQuality(_, let quality): try c.encode(name: quality, forKey: .quality)
        case .didUpdateName(_, let name): try c.encodeNullable(name, forKey: .name)
        case .didUpdateStatusMessage(_, let text): try c.encodeNullable(text, forKey: .statusMessage)
        case .didUpdateStatus(_, let status): try c.encode(name: status, forKey: .status)
        case .didPublishTrack(_, let sid, let kind), .didUnpublishTrack(_, let sid, let kind),
            .didSubscribeTrack(_, let sid, let kind), .didUnsubscribeTrack(_, let sid, let kind):
            try c.encode(sid, forKey: .sid)
            try c.encode(name: kind, forKey: .kind)
        case .didUpdateIsMuted(_, let sid, let isMuted):
            try c.encode(sid, forKey: .sid)
            try c.encode(isMuted, forKey: .isMuted)
        case .didReceiveMessage(_, let message): try c.encode(message, forKey: .message)
        case .didReceiveMuteRequest(_, let isMuted): try c.encode(isMuted, forKey: .isMuted)
        case .didUpdateSpeakingParticipants(let speakers): try c.encode(speakers, forKey: .speakers)
        }
    }

    /// Reads the room event named `event` from the event object.
    init(event: String, from c: KeyedDecodingContainer<NodeEvent.Field>) throws {
        func participant() throws -> NodeParticipant {
            NodeParticipant(
                friendId: try c.decode(String.self, forKey: .friendId), isLocal: try c.decode(Bool.self, forKey: .isLocal))
        }
        func sid() throws -> String { try c.decode(String.self, forKey: .sid) }
        func kind() throws -> TrackKind { try c.decode(name: TrackKind.self, forKey: .kind) }
        func mode() throws -> ParticipantMode { try c.decode(name: ParticipantMode.self, forKey: .mode) }
        func mediaSetupFailed() throws -> String {
            let error = try c.decode(String.self, forKey: .error)
            guard error == "mediaSetupFailed" else {
                throw DecodingError.dataCorruptedError(forKey: .error, in: c, debugDescription: "no error is named \(error)")
            }
            return try c.decode(String.self, forKey: .detail)
        }
        switch event {
        case "participantDidConnect": self = .participantDidConnect(try participant(), mode: try mode())
        case "participantDidDisconnect":
            let reason = try c.decodeIfPresent(String.self, forKey: .reason)
            let known = try reason.map { text in
                guard let r = DisconnectReason(wireName: text) else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .reason, in: c, debugDescription: "no disconnect reason is named \(text)")
                }
                return r
            }
            self = .participantDidDisconnect(try participant(), reason: known)
        case "roomDidStartCall": self = .roomDidStartCall
        case "roomDidEndCall": self = .roomDidEndCall
        case "callDidFailWithError":
            if try c.decode(String.self, forKey: .error) == "connectionLost" {
                self = .callDidFailWithError(.connectionLost)
            } else {
                let detail = try mediaSetupFailed()
                self = .callDidFailWithError(
                    .mediaSetupFailed(participant: try c.decode(String.self, forKey: .friendId), detail: detail))
            }
        case "didFailToPublishTrack":
            self = .didFailToPublishTrack(
                try participant(), kind: try kind(), error: .mediaSetupFailed(detail: try mediaSetupFailed()))
        case "didUpdateConnectionQuality":
            self = .didUpdateConnectionQuality(
                try participant(), quality: try c.decode(name: ConnectionQuality.self, forKey: .quality))
        case "didUpdateName": self = .didUpdateName(try participant(), name: try c.decodeIfPresent(String.self, forKey: .name))
        case "didUpdateStatusMessage":
            self = .didUpdateStatusMessage(
                try participant(), statusMessage: try c.decodeIfPresent(String.self, forKey: .statusMessage))
        case "didUpdateStatus":
            self = .didUpdateStatus(try participant(), status: try c.decode(name: UserStatus.self, forKey: .status))
        case "didPublishTrack": self = .didPublishTrack(try participant(), sid: try sid(), kind: try kind())
        case "didUnpublishTrack": self = .didUnpublishTrack(try participant(), sid: try sid(), kind: try kind())
        case "didSubscribeTrack": self = .didSubscribeTrack(try participant(), sid: try sid(), kind: try kind())
        case "didUnsubscribeTrack": self = .didUnsubscribeTrack(try participant(), sid: try sid(), kind: try kind())
        case "didUpdateIsMuted":
            self = .didUpdateIsMuted(try participant(), sid: try sid(), isMuted: try c.decode(Bool.self, forKey: .isMuted))
        case "didReceiveMessage":
            self = .didReceiveMessage(try participant(), message: try c.decode(String.self, forKey: .message))
        case "didReceiveMuteRequest":
            self = .didReceiveMuteRequest(try participant(), isMuted: try c.decode(Bool.self, forKey: .isMuted))
        case "didUpdateSpeakingParticipants":
            self = .didUpdateSpeakingParticipants(speakers: try c.decode([String].self, forKey: .speakers))
        case "didUpdateMode": self = .didUpdateMode(try participant(), mode: try mode())
        default:
            throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "no room event is named \(event)")
        }
    }
}

extension NodePath: Codable {
    enum Field: String, CodingKey { case kind, endpoint, rtt }

    /// Reads a path object.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            kind: try c.decode(name: FriendConnectionPath.Kind.self, forKey: .kind),
            endpoint: try c.decode(String.self, forKey: .endpoint), rtt: try c.decodeIfPresent(Double.self, forKey: .rtt))
    }

    /// Writes a path object (`rtt` only when measured).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(name: kind, forKey: .kind)
        try c.encode(endpoint, forKey: .endpoint)
        try c.encodeIfPresent(rtt, forKey: .rtt)
    }
}

extension NodeFriend: Codable {
    enum Field: String, CodingKey { case friendId, name, statusMessage, status, isOnline, paths, presence }

    /// Reads a friend object.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            friendId: try c.decode(String.self, forKey: .friendId), name: try c.decode(String.self, forKey: .name),
            statusMessage: try c.decode(String.self, forKey: .statusMessage),
            status: try c.decode(name: UserStatus.self, forKey: .status), isOnline: try c.decode(Bool.self, forKey: .isOnline),
            paths: try c.decode([NodePath].self, forKey: .paths),
            presence: try c.decode(name: PresenceStatus.self, forKey: .presence))
    }

    /// Writes a friend object.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(friendId, forKey: .friendId)
        try c.encode(name, forKey: .name)
        try c.encode(statusMessage, forKey: .statusMessage)
        try c.encode(name: status, forKey: .status)
        try c.encode(isOnline, forKey: .isOnline)
        try c.encode(paths, forKey: .paths)
        try c.encode(name: presence, forKey: .presence)
    }
}

extension NodeMediaStats: Codable {
    enum Field: String, CodingKey { case participants, uplinkBytes, videoSend }

    /// Reads the stats' fields (from the reply object itself).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            participants: try c.decode([NodeMediaParticipant].self, forKey: .participants),
            uplinkBytes: try c.decode(Int.self, forKey: .uplinkBytes),
            videoSend: try c.decodeIfPresent(NodeVideoSend.self, forKey: .videoSend))
    }

    /// Writes the stats' fields (`videoSend` only with a video track).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(participants, forKey: .participants)
        try c.encode(uplinkBytes, forKey: .uplinkBytes)
        try c.encodeIfPresent(videoSend, forKey: .videoSend)
    }
}

extension NodeMediaParticipant: Codable {
    enum Field: String, CodingKey { case friendId, videoFrames, audioSamples, loudSamples, path }

    /// Reads a participant's stats (`path` null or absent: nil).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            friendId: try c.decode(String.self, forKey: .friendId), videoFrames: try c.decode(Int.self, forKey: .videoFrames),
            audioSamples: try c.decode(Int.self, forKey: .audioSamples),
            loudSamples: try c.decode(Int.self, forKey: .loudSamples),
            path: try c.decodeIfPresent(NodeMediaPath.self, forKey: .path))
    }

    /// Writes a participant's stats (`"path":null` without a leg).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(friendId, forKey: .friendId)
        try c.encode(videoFrames, forKey: .videoFrames)
        try c.encode(audioSamples, forKey: .audioSamples)
        try c.encode(loudSamples, forKey: .loudSamples)
        try c.encodeNullable(path, forKey: .path)
    }
}

extension NodeRoomState: Codable {
    enum Field: String, CodingKey { case participants, mode, tracks, activeSpeakers }

    /// Reads the room's fields (from the reply object itself).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            participants: try c.decode([NodeRoomParticipant].self, forKey: .participants),
            mode: try c.decode(name: ParticipantMode.self, forKey: .mode),
            tracks: try c.decode([NodeTrack].self, forKey: .tracks),
            activeSpeakers: try c.decode([String].self, forKey: .activeSpeakers))
    }

    /// Writes the room's fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(participants, forKey: .participants)
        try c.encode(name: mode, forKey: .mode)
        try c.encode(tracks, forKey: .tracks)
        try c.encode(activeSpeakers, forKey: .activeSpeakers)
    }
}

extension NodeRoomParticipant: Codable {
    enum Field: String, CodingKey { case friendId, name, mode, tracks, connectionQuality, isSpeaking, byLink }

    /// Reads a participant object (`name` null or absent: nil).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            friendId: try c.decode(String.self, forKey: .friendId), name: try c.decodeIfPresent(String.self, forKey: .name),
            mode: try c.decode(name: ParticipantMode.self, forKey: .mode),
            tracks: try c.decode([NodeTrack].self, forKey: .tracks),
            connectionQuality: try c.decode(name: ConnectionQuality.self, forKey: .connectionQuality),
            isSpeaking: try c.decode(Bool.self, forKey: .isSpeaking),
            byLink: try c.decodeIfPresent(Bool.self, forKey: .byLink) ?? false)
    }

    /// Writes a participant object (`"name":null` without a name).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(friendId, forKey: .friendId)
        try c.encodeNullable(name, forKey: .name)
        try c.encode(name: mode, forKey: .mode)
        try c.encode(tracks, forKey: .tracks)
        try c.encode(name: connectionQuality, forKey: .connectionQuality)
        try c.encode(isSpeaking, forKey: .isSpeaking)
        if byLink { try c.encode(true, forKey: .byLink) }
    }
}

extension NodeTrack: Codable {
    enum Field: String, CodingKey { case sid, kind, isMuted, isSubscribed }

    /// Reads a track object.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        self.init(
            sid: try c.decode(String.self, forKey: .sid), kind: try c.decode(name: TrackKind.self, forKey: .kind),
            isMuted: try c.decode(Bool.self, forKey: .isMuted),
            isSubscribed: try c.decodeIfPresent(Bool.self, forKey: .isSubscribed))
    }

    /// Writes a track object (`isSubscribed` only for a remote track).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(sid, forKey: .sid)
        try c.encode(name: kind, forKey: .kind)
        try c.encode(isMuted, forKey: .isMuted)
        try c.encodeIfPresent(isSubscribed, forKey: .isSubscribed)
    }
}
