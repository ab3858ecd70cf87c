import Foundation
import MediaCore
import RevueNodeProtocol
import RevueSession
import Testing

/// RevueNodeProtocol's command lines: what revue-node answers for each kind of line
/// (docs/revue-node.md), and that `encode` writes lines `parse` reads back.
@Suite struct NodeCommandLineTests {
    struct NotARequest: Error { let line: String }

    func request(_ line: String) throws -> NodeRequest {
        guard case .request(let r) = NodeCommandLine.parse(line) else { throw NotARequest(line: line) }
        return r
    }

    func error(_ line: String) -> NodeCommandError? {
        if case .error(let e) = NodeCommandLine.parse(line) { return e }
        return nil
    }

    @Test func blankLinesAreIgnoredAndNonObjectsAreInvalid() {
        #expect(NodeCommandLine.parse("") == .blank)
        #expect(NodeCommandLine.parse(" \t ") == .blank)
        for line in ["not json", "[1,2]", "{\"cmd\":3}", "{\"id\":1}", "\"cmd\""] {
            let e = error(line)
            #expect(e?.error == "invalidCommand" && e?.name == nil && e?.id == nil, "\(line)")
            #expect(e?.fields["detail"] != nil)
        }
    }

    @Test func fieldErrorsNameTheCommandTheFieldAndEchoTheID() throws {
        let missing = try #require(error(#"{"cmd":"add-friend","id":[1,{"a":null}]}"#))
        #expect(missing.name == "add-friend" && missing.error == "missingField" && missing.fields == ["field": "address"])
        #expect(missing.id?.json == .array([.int(1), .object(["a": .null])]))
        #expect(
            NodeCommandLine.encode(NodeRequest(name: "list", id: missing.id, command: .list))
                == #"{"cmd":"list","id":[1,{"a":null}]}"#)
        // A field of the wrong type counts as absent: missing when required, its default when not.
        #expect(error(#"{"cmd":"accept","friendId":7}"#)?.fields == ["field": "friendId"])
        #expect(try request(#"{"cmd":"mic","enabled":"no"}"#).command == .mic(enabled: true))
        #expect(try request(#"{"cmd":"list","id":2.5}"#).id == NodeCommandID(.double(2.5)))
        #expect(error(#"{"cmd":"message","friendId":"AB"}"#)?.fields == ["field": "friendId/message"])
        #expect(error(#"{"cmd":"set-nospam","nospam":4294967296}"#)?.fields == ["field": "nospam"])
        #expect(error(#"{"cmd":"set-nospam","nospam":-1}"#)?.error == "missingField")
        #expect(error(#"{"cmd":"set-status","status":"dnd"}"#)?.error == "invalidStatus")
        #expect(error(#"{"cmd":"mode","mode":"broadcast"}"#)?.error == "invalidMode")
        let unknown = try #require(error(#"{"cmd":"nope","id":"x"}"#))
        #expect(
            unknown.error == "unknownCommand"
                && unknown.event == .error(NodeErrorReply(cmd: "nope", id: NodeCommandID("x"), error: "unknownCommand")))
    }

    @Test func defaultsMatchTheProtocol() throws {
        #expect(
            try request(#"{"cmd":"message","friendId":"A","message":"m"}"#).command
                == .message(friendId: "A", message: "m", timeout: 10))
        #expect(try request(#"{"cmd":"feed"}"#).command == .feed(seconds: 5, tone: 440))
        #expect(try request(#"{"cmd":"mute"}"#).command == .mute(sid: "audio"))
        #expect(try request(#"{"cmd":"set-status"}"#).command == .setStatus(.none))
        #expect(try request(#"{"cmd":"mute-request"}"#).command == .muteRequest(friendId: nil, isMuted: true))
        #expect(
            try request(#"{"cmd":"subscribe","friendId":"B"}"#).command == .subscribe(friendId: "B", sid: "", subscribed: true))
        #expect(try request(#"{"cmd":"add-friend","address":"X"}"#).command == .addFriend(address: "X", message: ""))
        let call = try request(#"{"cmd":"call-message","message":"hi","to":["A","B"],"timeout":2.5,"id":7}"#)
        #expect(call.command == .callMessage(message: "hi", to: ["A", "B"], timeout: 2.5))
        #expect(call.id?.json == 7)
    }

    @Test func everyCommandRoundTripsThroughItsLine() throws {
        let commands: [NodeCommand] = [
            .address, .addFriend(address: "A", message: "m\n\"q\""), .accept(friendId: "F"), .delete(friendId: "F"),
            .setName("n"),
            .setStatusMessage("s"), .setStatus(.busy), .setNospam(.max), .message(friendId: "F", message: "é", timeout: 0.25),
            .list, .counters, .invite(friendId: "F", message: ""), .acceptCall(friendId: "F"), .rejectCall(friendId: "F"),
            .cancelCall(friendId: "F"), .hangup(friendId: nil), .callMessage(message: "c", to: nil, timeout: 1),
            .muteRequest(friendId: "F", isMuted: false), .mic(enabled: false), .camera(enabled: true), .mute(sid: "v"),
            .unmute(sid: "a"), .subscribe(friendId: nil, sid: "x", subscribed: false), .mode(.signallingOnly),
            .feed(seconds: 1, tone: 1000), .mediaStats, .room, .createLink(name: "H"),
            .joinLink(link: "revue-room://x#k1.y", name: "G"),
            .revokeLink(link: "l"), .quit,
        ]
        for (i, c) in commands.enumerated() {
            let r = NodeRequest(name: NodeCommandLine.name(of: c), id: NodeCommandID(.int(Int64(i))), command: c)
            let line = NodeCommandLine.encode(r)
            #expect(!line.contains("\n"))
            #expect(try request(line) == r, "\(line)")
        }
    }
}

/// `--stun` and `--turn`: the text forms `RevueICEServer(parsing:)` reads, what they resolve to,
/// and the usage errors revue-node gives for bad values (exit status 2, the option named).
@Suite struct ICEServerOptionTests {
    @Test func stunAndTurnFormsParse() throws {
        let stun = try RevueICEServer(parsing: "203.0.113.1:3478")
        #expect(stun == .stun("203.0.113.1:3478") && stun.kind == .stun && stun.username.isEmpty)
        let turn = try RevueICEServer(parsing: "alice:wonder@land@203.0.113.1:3478")
        #expect(turn == .turn("203.0.113.1:3478", username: "alice", password: "wonder@land"))
        #expect(turn.transport == .udp && turn.description == "turn:alice@203.0.113.1:3478")
        let tcp = try RevueICEServer(parsing: "u:p@[2001:db8::1]:3478?transport=tcp")
        #expect(tcp == .turn("[2001:db8::1]:3478", username: "u", password: "p", transport: .tcp))
        #expect(try RevueICEServer(parsing: "u:p@h:1?transport=udp").transport == .udp)
        #expect(try RevueICEServer(parsing: "turn.example.net:443").address == "turn.example.net:443")
    }

    /// The RFC 7065 schemes: `turns:` is TURN over TLS (port 5349 unless given), with a CA file or
    /// a pinned SHA-256 fingerprint; `turn:` and `stun:` default to port 3478; a user named like a
    /// scheme still parses as a user.
    @Test func schemesAndTLSFormsParse() throws {
        let pin = String(repeating: "ab", count: 32)
        let tls = try RevueICEServer(parsing: "turns:alice:pw@turn.example.net?ca=/etc/ca.pem")
        #expect(
            tls == .turns("turn.example.net:5349", username: "alice", password: "pw", certificateAuthorityFile: "/etc/ca.pem"))
        #expect(tls.transport == .tls && tls.description == "turns:alice@turn.example.net:5349")
        let pinned = try RevueICEServer(parsing: "turns:u:p@[2001:db8::1]:443?transport=tcp&fingerprint=\(pin)")
        #expect(pinned.address == "[2001:db8::1]:443" && pinned.certificateSHA256 == pin && pinned.transport == .tls)
        #expect(try RevueICEServer(parsing: "turn:u:p@h").address == "h:3478")
        #expect(try RevueICEServer(parsing: "turn:u:p@h:1?transport=tcp").transport == .tcp)
        #expect(try RevueICEServer(parsing: "stun:h") == .stun("h:3478"))
        #expect(try RevueICEServer(parsing: "turn:secret@h:1") == .turn("h:1", username: "turn", password: "secret"))
        // Resolved: the host name is what the certificate must name; a numeric address is checked
        // as an IP subjectAltName; the pin becomes bytes.
        let named = try RevueICEServer(parsing: "turns:u:p@localhost:5349?ca=/ca.pem").resolved()
        #expect(named?.transport == .tls && named?.address == .loopbackIPv4(port: 5349))
        #expect(named?.tls == ICEServer.TLSVerification(serverName: "localhost", certificateAuthorityFile: "/ca.pem"))
        let numeric = try RevueICEServer(parsing: "turns:u:p@127.0.0.1?fingerprint=\(pin)").resolved()
        #expect(numeric?.tls == ICEServer.TLSVerification(sha256Fingerprint: [UInt8](repeating: 0xAB, count: 32)))
        #expect(RevueICEServer.turns("h:1", username: "u", password: "p", certificateSHA256: "12").resolved() == nil)
        for text in [
            "turns:u:p@h?transport=udp", "turns:u:p@h?fingerprint=12", "turns:u:p@h?cert=x", "u:p@h:1?transport=tls",
            "u:p@h:1?ca=/ca.pem", "turn:u:p@h:0",
        ] {
            #expect(throws: RevueError.self, "\(text)") { try RevueICEServer(parsing: text) }
        }
    }

    @Test func malformedFormsAreInvalidConfiguration() {
        let bad = [
            "", "203.0.113.1", "203.0.113.1:0", "203.0.113.1:70000", ":3478", "2001:db8::1:3478", "[2001:db8::1:3478",
            "u@h:1", ":p@h:1", "u:@h:1", "u:p@h:1?transport=sctp", "u:p@h:1?relay=1", "h:1?transport=tcp", "a b:1",
        ]
        for text in bad {
            #expect(throws: RevueError.self, "\(text)") { try RevueICEServer(parsing: text) }
            do { _ = try RevueICEServer(parsing: text) } catch {
                #expect(error.code == .invalidConfiguration && error.message.contains("'\(text)'"), "\(error)")
            }
        }
    }

    @Test func resolvedServersKeepOrderAndAddRendezvousNodesAsSTUN() throws {
        #expect(
            RevueICEServer.turn("localhost:3478", username: "u", password: "p", transport: .tcp).resolved()
                == ICEServer(kind: .turn, address: .loopbackIPv4(port: 3478), username: "u", password: "p", transport: .tcp))
        #expect(RevueICEServer.stun("[::1]:19302").resolved() == ICEServer(kind: .stun, address: .loopbackIPv6(port: 19302)))
        #expect(RevueICEServer.stun("no port").resolved() == nil)
        var config = RevueConfiguration(dataDirectory: "/nonexistent")
        config.rendezvousNodes = ["127.0.0.1:33400", "203.0.113.1:3478"]
        config.iceServers = [.turn("203.0.113.1:3478", username: "u", password: "p"), .stun("203.0.113.1:3478"), .stun("x:")]
        let stunAt = { (a: String) in ICEServer(kind: .stun, address: try! SocketAddress(parsing: a)) }
        #expect(
            config.resolvedICEServers == [
                ICEServer(kind: .turn, address: try SocketAddress(parsing: "203.0.113.1:3478"), username: "u", password: "p"),
                stunAt("203.0.113.1:3478"), stunAt("127.0.0.1:33400"),
            ])
    }

    /// Runs revue-node with `arguments` (stdin empty); its exit status, standard output and
    /// standard error (small: read one after the other).
    func runNode(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try #require(NodeProcess.binary))
        p.arguments = arguments
        let out = Pipe(), err = Pipe()
        p.standardError = err
        p.standardOutput = out
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    @Test(.enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
    func badValuesAreUsageErrorsNamingTheOption() throws {
        let cases: [([String], String)] = [
            (["--stun", "203.0.113.1"], "--stun 203.0.113.1: ICE server '203.0.113.1': missing :PORT"),
            (["--stun", "u:p@203.0.113.1:3478"], "--stun takes HOST:PORT"),
            (["--turn", "203.0.113.1:3478"], "--turn takes USER:PASS@HOST:PORT"),
            (["--turn", "u:@203.0.113.1:3478"], "empty TURN password"),
            (["--turn", "u:p@203.0.113.1:3478?transport=quic"], "?transport=udp or ?transport=tcp"),
            (["--stun"], "--stun"),
            (["--sfu", "ftp://127.0.0.1:8088/janus"], "--sfu takes http://, https://, ws:// or wss://"),
            (["--sfu", "https://user@janus.example/janus"], "--sfu takes http://, https://, ws:// or wss://"),
            (["--sfu-token", "/etc/hostname"], "--sfu-token goes with --sfu"),
            (["--sfu", "http://127.0.0.1:8088/janus", "--sfu-room", "0"], "--sfu-room"),
            (["--sfu-room", "7"], "--sfu-room and --sfu-clear go with --sfu"),
            (["--sfu-clear"], "--sfu-room and --sfu-clear go with --sfu"),
        ]
        for (arguments, message) in cases {
            let run = try runNode(["--data", "/nonexistent/revue-node-usage"] + arguments)
            #expect(run.status == 2 && run.stderr.contains(message), "\(arguments): \(run.status) \(run.stderr)")
        }
        // A credential file that cannot be read is an input error (exit 1) naming the option.
        let unreadable = try runNode(
            ["--data", "/nonexistent/revue-node-usage", "--sfu", "wss://janus.example/", "--sfu-token", "/nonexistent/token"])
        #expect(unreadable.status == 1 && unreadable.stderr.contains("--sfu-token /nonexistent/token"), "\(unreadable)")
        let help = try runNode(["--help"])
        #expect(
            help.status == 0 && help.stdout.contains("--stun HOST:PORT")
                && help.stdout.contains("--turn USER:PASS@HOST:PORT[?transport=tcp]") && help.stdout.contains("--sfu URL"))
    }
}
