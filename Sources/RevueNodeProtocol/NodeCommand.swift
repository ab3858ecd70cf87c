// The revue-node command protocol (docs/revue-node.md): one JSON object per stdin line, turned
// into a typed command or an error event. revue-node runs the commands; the fuzz target
// fuzz-node-command (Fuzz/, docs/robustness.md) feeds it arbitrary lines.
import Foundation
public import RevueSession

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
    /// `quit`: destroy and exit.
    case quit
}

/// The optional `"id"` of a command line, echoed in every reply. Any JSON value is allowed; it
/// is kept as its JSON text so it echoes unchanged.
/// Thread rule: a value type. Cost: one JSON parse per `value`.
public struct NodeCommandID: Sendable, Equatable {
    /// The value as JSON text (JSONSerialization's form, keys sorted).
    public let json: String

    /// Wraps a JSON value of `JSONSerialization`; nil when it cannot be written back as JSON.
    public init?(_ value: Any) {
        guard JSONSerialization.isValidJSONObject([value]),
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        json = String(decoding: data, as: UTF8.self)
    }

    /// The value as `JSONSerialization` returns it (NSNumber, String, Array, Dictionary, NSNull),
    /// for a reply object.
    public var value: Any {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed])) ?? NSNull()
    }
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

    /// The error event as a JSON object for `JSONSerialization`: `event`, `error`, `cmd`, `id`, fields.
    public var event: [String: Any] {
        var o: [String: Any] = ["event": "error", "error": error]
        if let name { o["cmd"] = name }
        if let id { o["id"] = id.value }
        for (k, v) in fields { o[k] = v }
        return o
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
        guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { return .blank }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
            let cmd = object["cmd"] as? String
        else {
            return .error(
                NodeCommandError(
                    name: nil, id: nil, error: "invalidCommand",
                    fields: ["detail": "each line must be a JSON object with a \"cmd\" string"]))
        }
        let id = object["id"].flatMap { NodeCommandID($0) }
        func string(_ key: String) -> String? { object[key] as? String }
        func bool(_ key: String, _ fallback: Bool) -> Bool { (object[key] as? Bool) ?? fallback }
        func double(_ key: String, _ fallback: Double) -> Double { (object[key] as? Double) ?? fallback }
        func fail(_ error: String, _ fields: [String: String] = [:]) -> Parsed {
            .error(NodeCommandError(name: cmd, id: id, error: error, fields: fields))
        }
        func missing(_ field: String) -> Parsed { fail("missingField", ["field": field]) }
        let command: NodeCommand
        switch cmd {
        case "address": command = .address
        case "add-friend":
            guard let address = string("address") else { return missing("address") }
            command = .addFriend(address: address, message: string("message") ?? "")
        case "accept", "delete", "invite", "accept-call", "reject-call", "cancel-call":
            guard let friendId = string("friendId") else { return missing("friendId") }
            switch cmd {
            case "accept": command = .accept(friendId: friendId)
            case "delete": command = .delete(friendId: friendId)
            case "invite": command = .invite(friendId: friendId, message: string("message") ?? "")
            case "accept-call": command = .acceptCall(friendId: friendId)
            case "reject-call": command = .rejectCall(friendId: friendId)
            default: command = .cancelCall(friendId: friendId)
            }
        case "set-name": command = .setName(string("name") ?? "")
        case "set-status-message": command = .setStatusMessage(string("statusMessage") ?? "")
        case "set-status":
            switch string("status") ?? "none" {
            case "none": command = .setStatus(.none)
            case "away": command = .setStatus(.away)
            case "busy": command = .setStatus(.busy)
            default: return fail("invalidStatus")
            }
        case "set-nospam":
            guard let n = object["nospam"] as? Int, let v = UInt32(exactly: n) else { return missing("nospam") }
            command = .setNospam(v)
        case "message":
            guard let friendId = string("friendId"), let message = string("message") else { return missing("friendId/message") }
            command = .message(friendId: friendId, message: message, timeout: double("timeout", 10))
        case "list": command = .list
        case "counters": command = .counters
        case "hangup": command = .hangup(friendId: string("friendId"))
        case "call-message":
            guard let message = string("message") else { return missing("message") }
            command = .callMessage(message: message, to: object["to"] as? [String], timeout: double("timeout", 10))
        case "mute-request": command = .muteRequest(friendId: string("friendId"), isMuted: bool("isMuted", true))
        case "mic": command = .mic(enabled: bool("enabled", true))
        case "camera": command = .camera(enabled: bool("enabled", true))
        case "mute": command = .mute(sid: string("sid") ?? "audio")
        case "unmute": command = .unmute(sid: string("sid") ?? "audio")
        case "subscribe":
            command = .subscribe(friendId: string("friendId"), sid: string("sid") ?? "", subscribed: bool("subscribed", true))
        case "mode":
            guard let mode = string("mode").flatMap(ParticipantMode.init(rawValue:)) else { return fail("invalidMode") }
            command = .mode(mode)
        case "feed": command = .feed(seconds: double("seconds", 5), tone: double("tone", 440))
        case "media-stats": command = .mediaStats
        case "room": command = .room
        case "quit": command = .quit
        default: return fail("unknownCommand")
        }
        return .request(NodeRequest(name: cmd, id: id, command: command))
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
        case .quit: "quit"
        }
    }

    /// Writes a request as one command line (no newline) that `parse` reads back as the same
    /// request: every field explicit, keys sorted. For scripts and tests driving revue-node.
    public static func encode(_ request: NodeRequest) -> String {
        var o: [String: Any] = ["cmd": request.name]
        if let id = request.id { o["id"] = id.value }
        switch request.command {
        case .address, .list, .counters, .mediaStats, .room, .quit: break
        case .addFriend(let address, let message): o["address"] = address; o["message"] = message
        case .accept(let f), .delete(let f), .acceptCall(let f), .rejectCall(let f), .cancelCall(let f): o["friendId"] = f
        case .invite(let f, let message): o["friendId"] = f; o["message"] = message
        case .setName(let name): o["name"] = name
        case .setStatusMessage(let text): o["statusMessage"] = text
        case .setStatus(let s): o["status"] = s == UserStatus.none ? "none" : s == .away ? "away" : "busy"
        case .setNospam(let n): o["nospam"] = Int(n)
        case .message(let f, let message, let timeout): o["friendId"] = f; o["message"] = message; o["timeout"] = timeout
        case .hangup(let f): if let f { o["friendId"] = f }
        case .callMessage(let message, let to, let timeout):
            o["message"] = message; o["timeout"] = timeout
            if let to { o["to"] = to }
        case .muteRequest(let f, let isMuted): if let f { o["friendId"] = f }; o["isMuted"] = isMuted
        case .mic(let enabled), .camera(let enabled): o["enabled"] = enabled
        case .mute(let sid), .unmute(let sid): o["sid"] = sid
        case .subscribe(let f, let sid, let subscribed):
            if let f { o["friendId"] = f }
            o["sid"] = sid; o["subscribed"] = subscribed
        case .mode(let m): o["mode"] = m.rawValue
        case .feed(let seconds, let tone): o["seconds"] = seconds; o["tone"] = tone
        }
        let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
