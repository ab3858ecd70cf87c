// revue-node: a headless Revue peer driven by JSON lines on stdin, reporting every RevueDelegate
// event as a JSON line on stdout; or, with a bare --rendezvous, a rendezvous node.
// The protocol is documented in docs/revue-node.md.
import RevueSDK
import Foundation
#if canImport(Glibc)
import Glibc
#endif

signal(SIGPIPE, SIG_IGN)

/// Writes one JSON object as a line on stdout.
func emit(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("revue-node: \(message)\n".utf8))
    exit(2)
}

let usage = """
usage: revue-node --data DIR [--host ADDR] [--port N] [--name NAME] [--rendezvous HOST:PORT]... [--lan]
       revue-node --rendezvous [--host ADDR] [--port N]
"""

struct Options {
    var data: String?
    var host = "0.0.0.0"
    var port: UInt16 = 0
    var name: String?
    var rendezvousNodes: [String] = []
    var serveRendezvous = false
    var lan = false
}

func parseOptions() -> Options {
    var o = Options()
    var args = Array(CommandLine.arguments.dropFirst())
    func value(_ flag: String) -> String {
        guard !args.isEmpty else { fail("\(flag) needs a value\n\(usage)") }
        return args.removeFirst()
    }
    while !args.isEmpty {
        let a = args.removeFirst()
        switch a {
        case "--data": o.data = value(a)
        case "--host": o.host = value(a)
        case "--port":
            guard let p = UInt16(value(a)) else { fail("--port needs a number 0-65535") }
            o.port = p
        case "--name": o.name = value(a)
        case "--lan": o.lan = true
        case "--rendezvous":
            if let next = args.first, !next.hasPrefix("--") {
                o.rendezvousNodes.append(args.removeFirst())
            } else {
                o.serveRendezvous = true
            }
        case "-h", "--help":
            print(usage)
            exit(0)
        default: fail("unknown option \(a)\n\(usage)")
        }
    }
    return o
}

let options = parseOptions()

// MARK: - Rendezvous mode

@MainActor
func runRendezvous() {
    do {
        let node = try RendezvousNode(host: options.host, port: options.port)
        nodeKeeper = node
        emit(["event": "ready", "mode": "rendezvous", "port": Int(node.port)])
    } catch {
        fail("\(error)")
    }
}

var nodeKeeper: RendezvousNode?

// MARK: - Peer mode

func statusName(_ s: UserStatus) -> String {
    switch s {
    case .none: return "none"
    case .away: return "away"
    case .busy: return "busy"
    }
}

func pathsObject(_ p: FriendConnectionPaths) -> [[String: Any]] {
    p.paths.map { path in
        var o: [String: Any] = ["endpoint": path.endpoint]
        switch path.kind {
        case .directLAN: o["kind"] = "directLAN"
        case .directUDP: o["kind"] = "directUDP"
        case .relayed: o["kind"] = "relayed"
        }
        if let rtt = path.roundTripTime { o["rtt"] = (rtt * 1e6).rounded() / 1e6 }
        return o
    }
}

func presenceName(_ p: PresenceStatus) -> String {
    switch p {
    case .offline: return "offline"
    case .online: return "online"
    case .away: return "away"
    case .busy: return "busy"
    }
}

/// Turns delegate calls into JSON lines named after the delegate methods.
@MainActor
final class EventPrinter: RevueDelegate {
    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
        emit(["event": "didReceiveFriendRequest", "friendId": friendId, "message": message])
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {
        emit(["event": "didUpdateName", "friendId": friendId, "name": name])
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String) {
        emit(["event": "didUpdateStatusMessage", "friendId": friendId, "statusMessage": statusMessage])
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
        emit(["event": "didUpdateStatus", "friendId": friendId, "status": statusName(status)])
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        emit(["event": "didUpdatePaths", "friendId": friendId, "isOnline": paths.isOnline, "paths": pathsObject(paths)])
    }
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
        emit(["event": "didReceiveMessage", "friendId": friendId, "message": message])
    }
    func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool) {
        emit(["event": "didUpdateIsDiscoverable", "isDiscoverable": isDiscoverable])
    }
}

let printer = EventPrinter()

@MainActor
func startPeer() {
    guard let data = options.data else { fail("--data DIR is required\n\(usage)") }
    var config = RevueConfiguration(dataDirectory: data)
    config.bindHost = options.host
    config.port = options.port
    config.rendezvousNodes = options.rendezvousNodes
    config.lanDiscovery = options.lan
    let revue = Revue.shared
    do {
        try revue.initialize(config)
    } catch {
        fail("\(error)")
    }
    revue.delegates.add(delegate: printer)
    if let name = options.name { revue.setSelfName(name) }
    emit(["event": "ready", "mode": "peer", "address": revue.revueAddress, "revueId": revue.revueId, "port": Int(revue.port)])
}

func errorName(_ error: any Error) -> String {
    let text = "\(error)"
    return text.split(separator: "(").first.map(String.init) ?? text
}

/// Runs one command line. Replies carry "cmd" and, when given, the command's "id".
@MainActor
func run(_ line: String) {
    guard let data = line.data(using: .utf8), !line.trimmingCharacters(in: .whitespaces).isEmpty else { return }
    guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let cmd = object["cmd"] as? String else {
        emit(["event": "error", "error": "invalidCommand", "detail": "each line must be a JSON object with a \"cmd\" string"])
        return
    }
    let revue = Revue.shared
    let friends = revue.friends
    var reply: [String: Any] = ["cmd": cmd]
    if let id = object["id"] { reply["id"] = id }
    func string(_ key: String) -> String? { object[key] as? String }
    func ok(_ extra: [String: Any] = [:]) { emit(reply.merging(["event": "ok"]) { $1 }.merging(extra) { $1 }) }
    func error(_ name: String, _ extra: [String: Any] = [:]) { emit(reply.merging(["event": "error", "error": name]) { $1 }.merging(extra) { $1 }) }
    switch cmd {
    case "address":
        ok(["address": revue.revueAddress, "revueId": revue.revueId, "port": Int(revue.port), "nospam": Int(revue.nospam)])
    case "add-friend":
        guard let address = string("address") else { return error("missingField", ["field": "address"]) }
        do { ok(["friendId": try friends.addFriend(address: address, message: string("message") ?? "")]) } catch let e { error(errorName(e)) }
    case "accept":
        guard let friendId = string("friendId") else { return error("missingField", ["field": "friendId"]) }
        do { ok(["friendId": try friends.addFriendNorequest(friendId: friendId)]) } catch let e { error(errorName(e)) }
    case "delete":
        guard let friendId = string("friendId") else { return error("missingField", ["field": "friendId"]) }
        do {
            try friends.deleteFriend(friendId: friendId)
            ok(["friendId": friendId])
        } catch .notFound { error("notFound") } catch let e { error("failed", ["code": -1, "detail": "\(e)"]) }
    case "set-name":
        revue.setSelfName(string("name") ?? "")
        ok()
    case "set-status-message":
        revue.setSelfStatusMessage(string("statusMessage") ?? "")
        ok()
    case "set-status":
        let status: UserStatus
        switch string("status") ?? "none" {
        case "none": status = .none
        case "away": status = .away
        case "busy": status = .busy
        default: return error("invalidStatus")
        }
        revue.setSelfStatus(status)
        ok()
    case "set-nospam":
        guard let n = object["nospam"] as? Int, let v = UInt32(exactly: n) else { return error("missingField", ["field": "nospam"]) }
        revue.nospam = v
        ok(["address": revue.revueAddress])
    case "message":
        guard let friendId = string("friendId"), let message = string("message") else {
            return error("missingField", ["field": "friendId/message"])
        }
        let timeout = (object["timeout"] as? Double) ?? 10
        Task { @MainActor in
            do throws(FriendMessageError) {
                let messageId = try await friends.sendMessage(friendId: friendId, message: message, timeout: timeout)
                ok(["friendId": friendId, "messageId": Int(messageId)])
            } catch .timeout(let messageId) {
                error("timeout", ["friendId": friendId, "messageId": Int(messageId)])
            } catch let e {
                error(errorName(e), ["friendId": friendId])
            }
        }
    case "list":
        let list: [[String: Any]] = friends.getFriendList().map { id in
            let paths = friends.getFriendPaths(friendId: id)
            return ["friendId": id, "name": friends.getFriendName(friendId: id),
                    "statusMessage": friends.getFriendStatusMessage(friendId: id),
                    "status": statusName(friends.getFriendStatus(friendId: id)),
                    "isOnline": paths.isOnline, "paths": pathsObject(paths),
                    "presence": presenceName(friends.getFriendPresenceStatus(friendId: id))]
        }
        ok(["friends": list])
    case "counters":
        let c = revue.counters
        ok(["droppedMalformed": c.droppedMalformed, "droppedForged": c.droppedForged, "droppedReplayed": c.droppedReplayed,
            "droppedUnknownSession": c.droppedUnknownSession, "droppedNonFriend": c.droppedNonFriend,
            "droppedWrongNospam": c.droppedWrongNospam, "droppedRateLimited": c.droppedRateLimited, "friendRequestsReceived": c.friendRequestsReceived,
            "duplicatesSuppressed": c.duplicatesSuppressed, "reservedMessagesSwallowed": c.reservedMessagesSwallowed,
            "handshakesCompleted": c.handshakesCompleted])
    case "quit":
        revue.destroy()
        ok()
        exit(0)
    default:
        error("unknownCommand")
    }
}

/// Reads stdin on its own thread; each line is run on the main actor, in order. EOF quits.
func readCommands() {
    let thread = Thread {
        while let line = readLine(strippingNewline: true) {
            DispatchQueue.main.async { MainActor.assumeIsolated { run(line) } }
        }
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                Revue.shared.destroy()
                exit(0)
            }
        }
    }
    thread.start()
}

MainActor.assumeIsolated {
    if options.serveRendezvous && options.data == nil {
        runRendezvous()
    } else {
        startPeer()
        readCommands()
    }
}
dispatchMain()
