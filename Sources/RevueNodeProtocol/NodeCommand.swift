package import MediaCore
public import RevueSession

// The revue-node command protocol (docs/revue-node.md): one JSON object per stdin line, turned
// into a typed command or an error event. revue-node runs the commands; the fuzz target
// fuzz-node-command (Fuzz/, docs/robustness.md) feeds it arbitrary lines.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One revue-node command, with the fields it takes already checked and typed.
/// Fields the old untyped code looked up later (a friend that must be in the call) stay optional,
/// so revue-node answers exactly as before (`notInCall`, `notFound`).
/// Thread rule: a value type. Cost: none beyond its strings.
public enum NodeCommand: Sendable, Equatable {
    /// `address`: the own address, ID, port and nospam.
    case address
    /// `add-friend`: a friend request to `address` (76 hex digits) with `message` (default empty).
    case addFriend(address: String, message: String)
    /// `accept`: accept a friend request from `friendId`.
    case accept(friendId: String)
    /// `delete`: remove a friend.
    case delete(friendId: String)
    /// `set-name` (missing name: empty).
    case setName(String)
    /// `set-status-message` (missing text: empty).
    case setStatusMessage(String)
    /// `set-status`: `none` (the default), `away` or `busy`.
    case setStatus(UserStatus)
    /// `set-nospam`: a new nospam, 0...2^32-1.
    case setNospam(UInt32)
    /// `message`: a friend message; `timeout` in seconds (default 10).
    case message(friendId: String, message: String, timeout: Double)
    /// `list`: every friend with name, status and paths.
    case list
    /// `counters`: the session layer's drop and handshake counters.
    case counters
    /// `invite`: a call invitation with `message` (default empty).
    case invite(friendId: String, message: String)
    /// `accept-call`.
    case acceptCall(friendId: String)
    /// `reject-call`.
    case rejectCall(friendId: String)
    /// `cancel-call`.
    case cancelCall(friendId: String)
    /// `hangup`: one participant, or everyone when `friendId` is nil.
    case hangup(friendId: String?)
    /// `call-message`: a message to the call (`to`: participant IDs, nil = everyone).
    case callMessage(message: String, to: [String]?, timeout: Double)
    /// `mute-request`: ask a participant to mute (`isMuted`, default true) or unmute.
    case muteRequest(friendId: String?, isMuted: Bool)
    /// `mic`: enable (default) or disable the microphone.
    case mic(enabled: Bool)
    /// `camera`: enable (default) or disable the camera.
    case camera(enabled: Bool)
    /// `mute`: mute a local track (`sid`, default `audio`).
    case mute(sid: String)
    /// `unmute`: unmute a local track (`sid`, default `audio`).
    case unmute(sid: String)
    /// `subscribe`: (un)subscribe a remote track (`sid`, default empty; `subscribed`, default true).
    case subscribe(friendId: String?, sid: String, subscribed: Bool)
    /// `mode`: change the participant mode.
    case mode(ParticipantMode)
    /// `feed`: play a tone of `tone` Hz and the test video into the local tracks for `seconds`.
    case feed(seconds: Double, tone: Double)
    /// `media-stats`: decoded frames and samples per participant.
    case mediaStats
    /// `room`: participants, tracks and modes.
    case room
    /// `create-link`: host a room on the `--sfu` server under `name`; the reply has the link.
    case createLink(name: String)
    /// `join-link`: join the room of `link` (its text) under `name`.
    case joinLink(link: String, name: String)
    /// `revoke-link`: let nobody in by `link` (its text) any more (host only).
    case revokeLink(link: String)
    /// `quit`: destroy and exit.
    case quit
}

/// The optional `"id"` of a command line, echoed in every reply. Any JSON value is allowed.
/// Thread rule: a value type. Cost: its storage.
public struct NodeCommandID: Sendable, Equatable, Codable {
    /// The value as sent.
    package let json: JSONValue

    /// Wraps a JSON value.
    package init(_ json: JSONValue) { self.json = json }

    /// Reads the id's JSON value.
    public init(from decoder: any Decoder) throws { json = try JSONValue(from: decoder) }

    /// Writes the id's JSON value.
    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
}

/// A parsed command line: the command name as sent, its id, and the typed command.
/// Thread rule: a value type. Cost: none.
public struct NodeRequest: Sendable, Equatable {
    /// The `"cmd"` string (replies carry it back as `"cmd"`).
    public var name: String
    /// The `"id"`, when the line had one.
    public var id: NodeCommandID?
    /// What to do.
    public var command: NodeCommand

    /// Makes a request; `name` must be the command's wire name (see `NodeCommandLine.encode`).
    public init(name: String, id: NodeCommandID? = nil, command: NodeCommand) {
        self.name = name
        self.id = id
        self.command = command
    }
}

/// A line that is not a valid command: the error event revue-node prints for it.
/// Thread rule: a value type. Cost: none.
public struct NodeCommandError: Error, Sendable, Equatable {
    /// The `"cmd"` of the line, nil when the line is not a JSON object with a `"cmd"` string.
    public var name: String?
    /// The `"id"` of the line, if any (only when `name` is set).
    public var id: NodeCommandID?
    /// The error name: `invalidCommand`, `unknownCommand`, `missingField`, `invalidStatus`, `invalidMode`.
    public var error: String
    /// Extra string fields of the event (`"field"` for `missingField`, `"detail"` for `invalidCommand`).
    public var fields: [String: String]

    /// The error event revue-node prints for the line: `error`, `cmd` and `id` when known, and
    /// `fields` (only `field` and `detail` are ever set). Cost: none.
    public var event: NodeEvent {
        .error(NodeErrorReply(cmd: name, id: id, error: error, detail: fields["detail"], field: fields["field"]))
    }
}

/// Parses and writes revue-node command lines (docs/revue-node.md).
/// Thread rule: stateless. Cost: one JSON parse (or write) per line.
public enum NodeCommandLine {
    /// What a line turned into.
    public enum Parsed: Sendable, Equatable {
        /// A blank line: revue-node ignores it.
        case blank
        /// A command to run.
        case request(NodeRequest)
        /// A line to answer with an error event.
        case error(NodeCommandError)
    }

    /// Parses one line: blank, a typed command, or the error event to print.
    public static func parse(_ line: String) -> Parsed {
        guard !line.trimmingWhitespace.isEmpty else { return .blank }
        do {
            return .request(try JSONDecoder().decode(NodeRequest.self, from: Data(line.utf8)))
        } catch let error as NodeCommandError {
            return .error(error)
        } catch {
            return .error(
                NodeCommandError(
                    name: nil, id: nil, error: "invalidCommand",
                    fields: ["detail": "each line must be a JSON object with a \"cmd\" string"]))
        }
    }

    /// The wire name of a command (`"cmd"`).
    public static func name(of command: NodeCommand) -> String {
        switch command {
        case .address: "address"
        case .addFriend: "add-friend"
        case .accept: "accept"
        case .delete: "delete"
        case .setName: "set-name"
        case .setStatusMessage: "set-status-message"
        case .setStatus: "set-status"
        case .setNospam: "set-nospam"
        case .message: "message"
        case .list: "list"
        case .counters: "counters"
        case .invite: "invite"
        case .acceptCall: "accept-call"
        case .rejectCall: "reject-call"
        case .cancelCall: "cancel-call"
        case .hangup: "hangup"
        case .callMessage: "call-message"
        case .muteRequest: "mute-request"
        case .mic: "mic"
        case .camera: "camera"
        case .mute: "mute"
        case .unmute: "unmute"
        case .subscribe: "subscribe"
        case .mode: "mode"
        case .feed: "feed"
        case .mediaStats: "media-stats"
        case .room: "room"
        case .createLink: "create-link"
        case .joinLink: "join-link"
        case .revokeLink: "revoke-link"
        case .quit: "quit"
        }
    }

    /// Writes a request as one command line (no newline) that `parse` reads back as the same
    /// request: every field explicit, keys sorted. For scripts and tests driving revue-node.
    public static func encode(_ request: NodeRequest) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only a non-finite number (which no parsed command holds) cannot be written.
        let data = (try? encoder.encode(request)) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// The command line's fields, decoded with `Codable`: `cmd` picks the command, the fields it
/// takes are checked and typed, and a field of the wrong type counts as absent (its default, or
/// `missingField` when it is required).
extension NodeRequest: Codable {
    enum Field: String, CodingKey {
        case cmd, id, address, message, friendId, name, statusMessage, status, nospam, timeout, to, isMuted, enabled, sid,
            subscribed, mode, seconds, tone, link
    }

    /// Reads one command object. Throws `NodeCommandError` for a known-shaped line with a bad
    /// command (unknown, a field missing, an invalid status or mode), and a `DecodingError` when
    /// the line is not a JSON object with a `"cmd"` string.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Field.self)
        let cmd = try c.decode(String.self, forKey: .cmd)
        let id = (try? c.decodeIfPresent(NodeCommandID.self, forKey: .id)) ?? nil
        func value<T: Decodable>(_ key: Field, _ type: T.Type = T.self) -> T? {
            (try? c.decodeIfPresent(T.self, forKey: key)) ?? nil
        }
        func string(_ key: Field) -> String? { value(key) }
        func fail(_ error: String, _ fields: [String: String] = [:]) -> NodeCommandError {
            NodeCommandError(name: cmd, id: id, error: error, fields: fields)
        }
        func required(_ key: Field) throws(NodeCommandError) -> String {
            guard let v = string(key) else { throw fail("missingField", ["field": key.rawValue]) }
            return v
        }
        let command: NodeCommand
        switch cmd {
        case "address": command = .address
        case "add-friend": command = .addFriend(address: try required(.address), message: string(.message) ?? "")
        case "accept": command = .accept(friendId: try required(.friendId))
        case "delete": command = .delete(friendId: try required(.friendId))
        case "invite": command = .invite(friendId: try required(.friendId), message: string(.message) ?? "")
        case "accept-call": command = .acceptCall(friendId: try required(.friendId))
        case "reject-call": command = .rejectCall(friendId: try required(.friendId))
        case "cancel-call": command = .cancelCall(friendId: try required(.friendId))
        case "set-name": command = .setName(string(.name) ?? "")
        case "set-status-message": command = .setStatusMessage(string(.statusMessage) ?? "")
        case "set-status":
            switch string(.status) ?? "none" {
            case "none": command = .setStatus(.none)
            case "away": command = .setStatus(.away)
            case "busy": command = .setStatus(.busy)
            default: throw fail("invalidStatus")
            }
        case "set-nospam":
            guard let n = value(.nospam, UInt32.self) else { throw fail("missingField", ["field": "nospam"]) }
            command = .setNospam(n)
        case "message":
            guard let friendId = string(.friendId), let message = string(.message) else {
                throw fail("missingField", ["field": "friendId/message"])
            }
            command = .message(friendId: friendId, message: message, timeout: value(.timeout) ?? 10)
        case "list": command = .list
        case "counters": command = .counters
        case "hangup": command = .hangup(friendId: string(.friendId))
        case "call-message":
            command = .callMessage(message: try required(.message), to: value(.to), timeout: value(.timeout) ?? 10)
        case "mute-request": command = .muteRequest(friendId: string(.friendId), isMuted: value(.isMuted) ?? true)
        case "mic": command = .mic(enabled: value(.enabled) ?? true)
        case "camera": command = .camera(enabled: value(.enabled) ?? true)
        case "mute": command = .mute(sid: string(.sid) ?? "audio")
        case "unmute": command = .unmute(sid: string(.sid) ?? "audio")
        case "subscribe":
            command = .subscribe(friendId: string(.friendId), sid: string(.sid) ?? "", subscribed: value(.subscribed) ?? true)
        case "mode":
            guard let mode = string(.mode).flatMap(ParticipantMode.init(rawValue:)) else { throw fail("invalidMode") }
            command = .mode(mode)
        case "feed": command = .feed(seconds: value(.seconds) ?? 5, tone: value(.tone) ?? 440)
        case "media-stats": command = .mediaStats
        case "room": command = .room
        case "create-link": command = .createLink(name: try required(.name))
        case "join-link": command = .joinLink(link: try required(.link), name: try required(.name))
        case "revoke-link": command = .revokeLink(link: try required(.link))
        case "quit": command = .quit
        default: throw fail("unknownCommand")
        }
        self.init(name: cmd, id: id, command: command)
    }

    /// Writes the command object: `cmd`, `id` when set, and every field the command takes.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Field.self)
        try c.encode(name, forKey: .cmd)
        try c.encodeIfPresent(id, forKey: .id)
        switch command {
        case .address, .list, .counters, .mediaStats, .room, .quit: break
        case .addFriend(let address, let message):
            try c.encode(address, forKey: .address)
            try c.encode(message, forKey: .message)
        case .accept(let f), .delete(let f), .acceptCall(let f), .rejectCall(let f), .cancelCall(let f):
            try c.encode(f, forKey: .friendId)
        case .invite(let f, let message):
            try c.encode(f, forKey: .friendId)
            try c.encode(message, forKey: .message)
        case .setName(let name): try c.encode(name, forKey: .name)
        case .setStatusMessage(let text): try c.encode(text, forKey: .statusMessage)
        case .setStatus(let s): try c.encode(s == UserStatus.none ? "none" : s == .away ? "away" : "busy", forKey: .status)
        case .setNospam(let n): try c.encode(n, forKey: .nospam)
        case .message(let f, let message, let timeout):
            try c.encode(f, forKey: .friendId)
            try c.encode(message, forKey: .message)
            try c.encode(timeout, forKey: .timeout)
        case .hangup(let f): try c.encodeIfPresent(f, forKey: .friendId)
        case .callMessage(let message, let to, let timeout):
            try c.encode(message, forKey: .message)
            try c.encode(timeout, forKey: .timeout)
            try c.encodeIfPresent(to, forKey: .to)
        case .muteRequest(let f, let isMuted):
            try c.encodeIfPresent(f, forKey: .friendId)
            try c.encode(isMuted, forKey: .isMuted)
        case .mic(let enabled), .camera(let enabled): try c.encode(enabled, forKey: .enabled)
        case .mute(let sid), .unmute(let sid): try c.encode(sid, forKey: .sid)
        case .subscribe(let f, let sid, let subscribed):
            try c.encodeIfPresent(f, forKey: .friendId)
            try c.encode(sid, forKey: .sid)
            try c.encode(subscribed, forKey: .subscribed)
        case .mode(let m): try c.encode(m.rawValue, forKey: .mode)
        case .feed(let seconds, let tone):
            try c.encode(seconds, forKey: .seconds)
            try c.encode(tone, forKey: .tone)
        case .createLink(let name): try c.encode(name, forKey: .name)
        case .joinLink(let link, let name):
            try c.encode(link, forKey: .link)
            try c.encode(name, forKey: .name)
        case .revokeLink(let link): try c.encode(link, forKey: .link)
        }
    }
}
