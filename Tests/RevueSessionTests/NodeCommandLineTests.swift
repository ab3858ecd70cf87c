import Foundation
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
        #expect(missing.id?.json == #"[1,{"a":null}]"#)
        #expect(error(#"{"cmd":"message","friendId":"AB"}"#)?.fields == ["field": "friendId/message"])
        #expect(error(#"{"cmd":"set-nospam","nospam":4294967296}"#)?.fields == ["field": "nospam"])
        #expect(error(#"{"cmd":"set-nospam","nospam":-1}"#)?.error == "missingField")
        #expect(error(#"{"cmd":"set-status","status":"dnd"}"#)?.error == "invalidStatus")
        #expect(error(#"{"cmd":"mode","mode":"broadcast"}"#)?.error == "invalidMode")
        let unknown = try #require(error(#"{"cmd":"nope","id":"x"}"#))
        #expect(unknown.error == "unknownCommand" && unknown.event["cmd"] as? String == "nope" && unknown.event["id"] as? String == "x")
    }

    @Test func defaultsMatchTheProtocol() throws {
        #expect(try request(#"{"cmd":"message","friendId":"A","message":"m"}"#).command == .message(friendId: "A", message: "m", timeout: 10))
        #expect(try request(#"{"cmd":"feed"}"#).command == .feed(seconds: 5, tone: 440))
        #expect(try request(#"{"cmd":"mute"}"#).command == .mute(sid: "audio"))
        #expect(try request(#"{"cmd":"set-status"}"#).command == .setStatus(.none))
        #expect(try request(#"{"cmd":"mute-request"}"#).command == .muteRequest(friendId: nil, isMuted: true))
        #expect(try request(#"{"cmd":"subscribe","friendId":"B"}"#).command == .subscribe(friendId: "B", sid: "", subscribed: true))
        #expect(try request(#"{"cmd":"add-friend","address":"X"}"#).command == .addFriend(address: "X", message: ""))
        let call = try request(#"{"cmd":"call-message","message":"hi","to":["A","B"],"timeout":2.5,"id":7}"#)
        #expect(call.command == .callMessage(message: "hi", to: ["A", "B"], timeout: 2.5))
        #expect(call.id?.value as? Int == 7)
    }

    @Test func everyCommandRoundTripsThroughItsLine() throws {
        let commands: [NodeCommand] = [
            .address, .addFriend(address: "A", message: "m\n\"q\""), .accept(friendId: "F"), .delete(friendId: "F"), .setName("n"),
            .setStatusMessage("s"), .setStatus(.busy), .setNospam(.max), .message(friendId: "F", message: "é", timeout: 0.25),
            .list, .counters, .invite(friendId: "F", message: ""), .acceptCall(friendId: "F"), .rejectCall(friendId: "F"),
            .cancelCall(friendId: "F"), .hangup(friendId: nil), .callMessage(message: "c", to: nil, timeout: 1),
            .muteRequest(friendId: "F", isMuted: false), .mic(enabled: false), .camera(enabled: true), .mute(sid: "v"),
            .unmute(sid: "a"), .subscribe(friendId: nil, sid: "x", subscribed: false), .mode(.signallingOnly),
            .feed(seconds: 1, tone: 1000), .mediaStats, .room, .quit,
        ]
        for (i, c) in commands.enumerated() {
            let r = NodeRequest(name: NodeCommandLine.name(of: c), id: NodeCommandID(i), command: c)
            let line = NodeCommandLine.encode(r)
            #expect(!line.contains("\n"))
            #expect(try request(line) == r, "\(line)")
        }
    }
}
