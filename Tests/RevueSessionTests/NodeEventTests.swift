import Foundation
import MediaCore
import RevueNodeProtocol
import Testing

@testable import RevueSession

/// RevueNodeProtocol's events: every kind of line revue-node writes survives `NodeEvent.line`
/// and `NodeEvent(line:)`, the lines are the ones revue-node wrote when it built them as JSON
/// dictionaries (same keys, numbers as numbers, `null` where a value is missing), and
/// docs/revue-node.md names every event and field.
@Suite struct NodeEventTests {
    static let alice = String(repeating: "A1", count: 32)
    static let bob = String(repeating: "B0", count: 32)
    static let remote = NodeParticipant(friendId: bob, isLocal: false)
    static let local = NodeParticipant(friendId: alice, isLocal: true)

    static var counters: NodeCounters {
        var c = RevueCounters()
        c.droppedMalformed = 1
        c.droppedForged = 2
        c.handshakesCompleted = 3
        c.callSignalsRefused = 4
        c.linkFailures = 5
        return NodeCounters(c)
    }

    static let meshPath = NodeMediaPath([
        "local": "srflx 192.0.2.2:40000", "remote": "relay 203.0.113.1:50000", "relayed": true, "sessionOnLink": false,
        "checksSent": 12, "route": .null, "pairs": ["a -> b valid selected"], "received": ["rtp": 900, "rtcp": 4],
    ])

    /// One event of every case, every room event, every command result and every error field.
    static let samples: [NodeEvent] = [
        .ready(.peer(address: String(repeating: "C", count: 76), revueId: alice, port: 40123, lan: false)),
        .ready(.rendezvous(port: 33400, turn: nil)),
        .ready(
            .rendezvous(
                port: 33400,
                turn: NodeTURNOffer(servers: ["203.0.113.1:3478", "203.0.113.1:3478?transport=tcp"], lifetime: 3600))),
        .ok(NodeReply(cmd: "set-name")),
        .ok(NodeReply(cmd: "quit", id: NodeCommandID(.array([1, ["a": .null]])))),
        .ok(
            NodeReply(
                cmd: "address", id: NodeCommandID(7),
                result: .identity(address: String(repeating: "C", count: 76), revueId: alice, port: 40123, nospam: .max))),
        .ok(NodeReply(cmd: "add-friend", result: .friend(friendId: bob))),
        .ok(NodeReply(cmd: "cancel-call", id: NodeCommandID("c"), result: .friend(friendId: bob))),
        .ok(NodeReply(cmd: "set-nospam", result: .address(String(repeating: "D", count: 76)))),
        .ok(NodeReply(cmd: "message", id: NodeCommandID(.double(2.5)), result: .messageSent(friendId: bob, messageId: 9))),
        .ok(
            NodeReply(
                cmd: "list",
                result: .friends([
                    NodeFriend(
                        friendId: bob, name: "Bob", statusMessage: "", status: .away, isOnline: true,
                        paths: [
                            NodePath(kind: .directLAN, endpoint: "127.0.0.1:41000", rtt: 0.0004),
                            NodePath(kind: .relayed, endpoint: "[2001:db8::1]:33400"),
                        ], presence: .busy),
                    NodeFriend(
                        friendId: alice, name: "Alice \"A\"/é", statusMessage: "s", status: .none, isOnline: false, paths: [],
                        presence: .offline),
                ]))),
        .ok(NodeReply(cmd: "counters", result: .counters(counters))),
        .ok(
            NodeReply(
                cmd: "call-message", id: NodeCommandID("m"),
                result: .callMessage(results: [bob: "delivered", alice: "friendNotReachable"]))),
        .ok(NodeReply(cmd: "unmute", result: .track(sid: "video"))),
        .ok(NodeReply(cmd: "mode", result: .mode(.signallingOnly))),
        .ok(
            NodeReply(
                cmd: "feed", id: NodeCommandID("f"),
                result: .feed(videoFramesFed: 30, audioSamplesFed: 96_000, maxLagMilliseconds: 0))),
        .ok(
            NodeReply(
                cmd: "media-stats",
                result: .mediaStats(
                    NodeMediaStats(
                        participants: [
                            NodeMediaParticipant(friendId: alice, videoFrames: 0, audioSamples: 0, loudSamples: 0, path: nil),
                            NodeMediaParticipant(
                                friendId: bob, videoFrames: 29, audioSamples: 95_040, loudSamples: 94_080, path: meshPath),
                        ], uplinkBytes: 123_456,
                        videoSend: NodeVideoSend(
                            captured: 30, droppedRingFull: 0, droppedPoolExhausted: 1, droppedFrameRate: 2, framesEncoded: 27,
                            framesDroppedByEncoder: 0, targetBitrate: 600_000, pacerOverflows: 0))))),
        .ok(NodeReply(cmd: "media-stats", result: .mediaStats(NodeMediaStats(participants: [], uplinkBytes: 0)))),
        .ok(
            NodeReply(cmd: "create-link", id: NodeCommandID("l"), result: .link("revue-room://127.0.0.1:8088?t=http&room=9#k1.x"))
        ),
        .ok(NodeReply(cmd: "join-link", result: .empty)),
        .ok(
            NodeReply(
                cmd: "room",
                result: .room(
                    NodeRoomState(
                        participants: [
                            NodeRoomParticipant(
                                friendId: bob, name: nil, mode: .recvOnly,
                                tracks: [NodeTrack(sid: "audio", kind: .audio, isMuted: true, isSubscribed: false)],
                                connectionQuality: .excellent, isSpeaking: true),
                            NodeRoomParticipant(
                                friendId: "link-0a1b", name: "Gil", mode: .sendAndRecv, tracks: [], connectionQuality: .good,
                                isSpeaking: false, byLink: true),
                        ], mode: .sendAndRecv,
                        tracks: [
                            NodeTrack(sid: "audio", kind: .audio, isMuted: false),
                            NodeTrack(sid: "video", kind: .video, isMuted: true),
                        ], activeSpeakers: [bob, alice])))),
        .error(NodeErrorReply(error: "invalidCommand", detail: "each line must be a JSON object with a \"cmd\" string")),
        .error(NodeErrorReply(cmd: "accept", id: NodeCommandID(1), error: "missingField", field: "friendId")),
        .error(NodeErrorReply(cmd: "message", id: NodeCommandID(2), error: "timeout", friendId: bob, messageId: 3)),
        .error(NodeErrorReply(cmd: "delete", error: "failed", code: -1, detail: "storageFailed")),
        .error(NodeErrorReply(cmd: "mute", error: "notPublished", sid: "video")),
        .didReceiveFriendRequest(friendId: alice, message: "hello\nBob"),
        .didUpdateName(friendId: bob, name: "Bob"),
        .didUpdateStatusMessage(friendId: bob, statusMessage: "out"),
        .didUpdateStatus(friendId: bob, status: .busy),
        .didUpdatePaths(
            friendId: bob, isOnline: true, paths: [NodePath(kind: .directUDP, endpoint: "198.51.100.2:5000", rtt: 0.125)]),
        .didUpdatePaths(friendId: bob, isOnline: false, paths: []),
        .didReceiveMessage(friendId: bob, message: "m0"),
        .didUpdateIsDiscoverable(isDiscoverable: true),
        .didSendInvitation(friendId: bob, message: "video"),
        .didSendInvitation(friendId: bob, message: nil),
        .didReceiveInvitation(friendId: alice, message: nil),
        .didReceiveInvitation(friendId: alice, message: ""),
        .didEndInvitation(friendId: bob, reason: .cancelled),
        .didEndInvitation(friendId: bob, reason: .rejected),
        .didEndInvitation(friendId: bob, reason: .timeout),
        .didEndInvitation(friendId: bob, reason: .finished),
        .room(.participantDidConnect(remote, mode: .sendAndRecv)),
        .room(.participantDidDisconnect(remote, reason: .remoteHangUp)),
        .room(.participantDidDisconnect(remote, reason: nil)),
        .room(.roomDidStartCall),
        .room(.roomDidEndCall),
        .room(.callDidFailWithError(.connectionLost)),
        .room(.callDidFailWithError(.mediaSetupFailed(participant: bob, detail: "no ICE pair succeeded"))),
        .room(.didFailToPublishTrack(local, kind: .video, error: .mediaSetupFailed(detail: "no encoder"))),
        .room(.didUpdateConnectionQuality(remote, quality: .poor)),
        .room(.didUpdateName(remote, name: "Bob")),
        .room(.didUpdateName(local, name: nil)),
        .room(.didUpdateStatusMessage(remote, statusMessage: nil)),
        .room(.didUpdateStatus(remote, status: .away)),
        .room(.didPublishTrack(local, sid: "audio", kind: .audio)),
        .room(.didUnpublishTrack(local, sid: "video", kind: .video)),
        .room(.didSubscribeTrack(remote, sid: "video", kind: .video)),
        .room(.didUnsubscribeTrack(remote, sid: "audio", kind: .audio)),
        .room(.didUpdateIsMuted(local, sid: "audio", isMuted: true)),
        .room(.didReceiveMessage(remote, message: "hello from c")),
        .room(.didReceiveMuteRequest(remote, isMuted: false)),
        .room(.didUpdateSpeakingParticipants(speakers: [])),
        .room(.didUpdateMode(remote, mode: .recvOnly)),
    ]

    @Test func everyEventRoundTripsThroughItsLine() throws {
        for event in Self.samples {
            let line = try #require(event.line, "\(event)")
            #expect(!line.contains("\n"), "\(line)")
            let read = try NodeEvent(line: line)
            #expect(read == event, "\(line)")
            #expect(read.line == line, "a line is written the same way again")
            // The line is an object whose "event" is the event's name.
            let object = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
            #expect(object["event"]?.string == event.name)
            #expect((object["layer"]?.string == "room") == isRoom(event))
        }
    }

    func isRoom(_ event: NodeEvent) -> Bool {
        if case .room = event { return true }
        return false
    }

    /// The samples hold every case: the names below are every event revue-node writes, and
    /// every command has a reply among them.
    @Test func samplesCoverEveryEventAndEveryReply() {
        let friendEvents: Set<String> = [
            "ready", "ok", "error", "didReceiveFriendRequest", "didUpdateName", "didUpdateStatusMessage", "didUpdateStatus",
            "didUpdatePaths", "didReceiveMessage", "didUpdateIsDiscoverable", "didSendInvitation", "didReceiveInvitation",
            "didEndInvitation",
        ]
        let roomEvents: Set<String> = [
            "participantDidConnect", "participantDidDisconnect", "roomDidStartCall", "roomDidEndCall", "callDidFailWithError",
            "didFailToPublishTrack", "didUpdateConnectionQuality", "didUpdateName", "didUpdateStatusMessage", "didUpdateStatus",
            "didPublishTrack", "didUnpublishTrack", "didSubscribeTrack", "didUnsubscribeTrack", "didUpdateIsMuted",
            "didReceiveMessage", "didReceiveMuteRequest", "didUpdateSpeakingParticipants", "didUpdateMode",
        ]
        #expect(Set(Self.samples.filter { !isRoom($0) }.map(\.name)) == friendEvents)
        #expect(Set(Self.samples.filter(isRoom).map(\.name)) == roomEvents)
        let results: [String] = Self.samples.compactMap {
            guard case .ok(let reply) = $0 else { return nil }
            switch reply.result {
            case .empty: return "empty"
            case .identity: return "identity"
            case .friend: return "friend"
            case .address: return "address"
            case .messageSent: return "messageSent"
            case .friends: return "friends"
            case .counters: return "counters"
            case .callMessage: return "callMessage"
            case .track: return "track"
            case .mode: return "mode"
            case .feed: return "feed"
            case .mediaStats: return "mediaStats"
            case .room: return "room"
            case .link: return "link"
            }
        }
        #expect(
            Set(results) == [
                "empty", "identity", "friend", "address", "messageSent", "friends", "counters", "callMessage", "track", "mode",
                "feed", "mediaStats", "room", "link",
            ])
    }

    /// The exact text of representative lines, as revue-node printed them before its events had a
    /// type: keys sorted, integers without a fraction, Booleans, `null`, nested objects sorted too.
    @Test func linesKeepTheFormatRevueNodeWrote() throws {
        let a = Self.alice, b = Self.bob
        let expected: [(NodeEvent, String)] = [
            (
                .ready(.peer(address: "AD", revueId: a, port: 40123, lan: false)),
                #"{"address":"AD","event":"ready","lan":false,"mode":"peer","port":40123,"revueId":"\#(a)"}"#
            ),
            (.ready(.rendezvous(port: 33400, turn: nil)), #"{"event":"ready","mode":"rendezvous","port":33400}"#),
            (
                .ready(.rendezvous(port: 1, turn: NodeTURNOffer(servers: ["h:3478?transport=tcp"], lifetime: 60))),
                #"{"event":"ready","mode":"rendezvous","port":1,"turn":["h:3478?transport=tcp"],"turnLifetime":60}"#
            ),
            (
                .ok(NodeReply(cmd: "message", id: NodeCommandID(7), result: .messageSent(friendId: b, messageId: 1))),
                #"{"cmd":"message","event":"ok","friendId":"\#(b)","id":7,"messageId":1}"#
            ),
            (
                .ok(
                    NodeReply(
                        cmd: "feed", id: NodeCommandID("f"),
                        result: .feed(videoFramesFed: 30, audioSamplesFed: 96000, maxLagMilliseconds: 3))),
                #"{"audioSamplesFed":96000,"cmd":"feed","event":"ok","id":"f","maxLagMilliseconds":3,"videoFramesFed":30}"#
            ),
            (
                .error(NodeErrorReply(cmd: "message", id: NodeCommandID(2), error: "timeout", friendId: b, messageId: 3)),
                #"{"cmd":"message","error":"timeout","event":"error","friendId":"\#(b)","id":2,"messageId":3}"#
            ),
            (
                .error(NodeErrorReply(cmd: "delete", error: "failed", code: -1, detail: "x")),
                #"{"cmd":"delete","code":-1,"detail":"x","error":"failed","event":"error"}"#
            ),
            (
                .didUpdatePaths(
                    friendId: b, isOnline: true,
                    paths: [
                        NodePath(kind: .directLAN, endpoint: "127.0.0.1:41000", rtt: 0.0004),
                        NodePath(kind: .relayed, endpoint: "r"),
                    ]),
                #"{"event":"didUpdatePaths","friendId":"\#(b)","isOnline":true,"paths":[{"endpoint":"127.0.0.1:41000","kind":"directLAN","rtt":0.0004},{"endpoint":"r","kind":"relayed"}]}"#
            ),
            (.didSendInvitation(friendId: b, message: nil), #"{"event":"didSendInvitation","friendId":"\#(b)","message":null}"#),
            (
                .didEndInvitation(friendId: b, reason: .timeout),
                #"{"event":"didEndInvitation","friendId":"\#(b)","reason":"timeout"}"#
            ),
            (
                .room(.participantDidDisconnect(Self.remote, reason: .remoteHangUp)),
                #"{"event":"participantDidDisconnect","friendId":"\#(b)","isLocal":false,"layer":"room","reason":"remoteHangUp"}"#
            ),
            (
                .room(.callDidFailWithError(.mediaSetupFailed(participant: b, detail: "d"))),
                #"{"detail":"d","error":"mediaSetupFailed","event":"callDidFailWithError","friendId":"\#(b)","layer":"room"}"#
            ),
            (
                .room(.didUpdateConnectionQuality(Self.local, quality: .excellent)),
                #"{"event":"didUpdateConnectionQuality","friendId":"\#(a)","isLocal":true,"layer":"room","quality":"excellent"}"#
            ),
            (.room(.roomDidStartCall), #"{"event":"roomDidStartCall","layer":"room"}"#),
        ]
        for (event, line) in expected { #expect(event.line == line) }
    }

    /// The replies with many fields, against the dictionaries revue-node built for them before
    /// (the same keys and JSON types, written by `JSONValue.sortedLine` as it did).
    @Test func structuredRepliesMatchTheirDictionaryForm() throws {
        let c = Self.counters
        let countersObject: [String: JSONValue] = [
            "event": "ok", "cmd": "counters",
            "droppedMalformed": .integer(c.droppedMalformed), "droppedForged": .integer(c.droppedForged),
            "droppedReplayed": .integer(c.droppedReplayed),
            "droppedUnknownSession": .integer(c.droppedUnknownSession), "droppedNonFriend": .integer(c.droppedNonFriend),
            "droppedWrongNospam": .integer(c.droppedWrongNospam), "droppedRateLimited": .integer(c.droppedRateLimited),
            "friendRequestsReceived": .integer(c.friendRequestsReceived),
            "duplicatesSuppressed": .integer(c.duplicatesSuppressed),
            "reservedMessagesSwallowed": .integer(c.reservedMessagesSwallowed),
            "handshakesCompleted": .integer(c.handshakesCompleted), "droppedAnnounces": .integer(c.droppedAnnounces),
            "initiationsThrottled": .integer(c.initiationsThrottled), "candidatesDropped": .integer(c.candidatesDropped),
            "cookieRepliesSent": .integer(c.cookieRepliesSent), "droppedExpired": .integer(c.droppedExpired),
            "droppedLookupReplies": .integer(c.droppedLookupReplies), "droppedOverload": .integer(c.droppedOverload),
            "turnCredentialsRequested": .integer(c.turnCredentialsRequested),
            "turnCredentialsReceived": .integer(c.turnCredentialsReceived),
            "requestsForgotten": .integer(c.requestsForgotten), "callSignalsRefused": .integer(c.callSignalsRefused),
        ]
        #expect(c.handshakesCompleted == 3 && c.callSignalsRefused == 4)
        #expect(Self.meshPath.text.hasPrefix(#"{"checksSent":12,"local":"srflx 192.0.2.2:40000","pairs":["#))
        #expect(
            NodeEvent.ok(NodeReply(cmd: "counters", result: .counters(c))).line == JSONValue.object(countersObject).sortedLine)

        let b = Self.bob
        let stats = NodeMediaStats(
            participants: [NodeMediaParticipant(friendId: b, videoFrames: 29, audioSamples: 960, loudSamples: 0, path: nil)],
            uplinkBytes: 5,
            videoSend: NodeVideoSend(
                captured: 1, droppedRingFull: 2, droppedPoolExhausted: 3, droppedFrameRate: 4, framesEncoded: 5,
                framesDroppedByEncoder: 6, targetBitrate: 7, pacerOverflows: 8))
        let statsObject: [String: JSONValue] = [
            "event": "ok", "cmd": "media-stats", "id": "s",
            "participants": [
                ["friendId": .string(b), "videoFrames": 29, "audioSamples": 960, "loudSamples": 0, "path": .null]
            ],
            "uplinkBytes": 5,
            "videoSend": [
                "captured": 1, "droppedRingFull": 2, "droppedPoolExhausted": 3, "droppedFrameRate": 4, "framesEncoded": 5,
                "framesDroppedByEncoder": 6, "targetBitrate": 7, "pacerOverflows": 8,
            ],
        ]
        #expect(
            NodeEvent.ok(NodeReply(cmd: "media-stats", id: NodeCommandID("s"), result: .mediaStats(stats))).line
                == JSONValue.object(statsObject).sortedLine)
        let withPath = NodeMediaParticipant(friendId: b, videoFrames: 0, audioSamples: 0, loudSamples: 0, path: Self.meshPath)
        #expect(
            NodeEvent.ok(
                NodeReply(cmd: "media-stats", result: .mediaStats(NodeMediaStats(participants: [withPath], uplinkBytes: 0)))
            )
            .line
                == JSONValue.object([
                    "event": "ok", "cmd": "media-stats", "uplinkBytes": 0,
                    "participants": [
                        [
                            "friendId": .string(b), "videoFrames": 0, "audioSamples": 0, "loudSamples": 0,
                            "path": .object(Self.meshPath.fields),
                        ]
                    ],
                ]).sortedLine)

        let room = NodeRoomState(
            participants: [
                NodeRoomParticipant(
                    friendId: b, name: nil, mode: .recvOnly,
                    tracks: [NodeTrack(sid: "video", kind: .video, isMuted: false, isSubscribed: true)],
                    connectionQuality: .unknown, isSpeaking: false)
            ], mode: .signallingOnly, tracks: [], activeSpeakers: [b])
        let roomObject: [String: JSONValue] = [
            "event": "ok", "cmd": "room",
            "participants": [
                [
                    "friendId": .string(b), "name": .null, "mode": "recvOnly",
                    "tracks": [["sid": "video", "kind": "video", "isMuted": false, "isSubscribed": true]],
                    "connectionQuality": "unknown", "isSpeaking": false,
                ]
            ],
            "mode": "signallingOnly", "tracks": [], "activeSpeakers": [.string(b)],
        ]
        #expect(NodeEvent.ok(NodeReply(cmd: "room", result: .room(room))).line == JSONValue.object(roomObject).sortedLine)

        let friend = NodeFriend(
            friendId: b, name: "Bob", statusMessage: "x", status: .busy, isOnline: true,
            paths: [NodePath(kind: .directUDP, endpoint: "e", rtt: 0.5)], presence: .online)
        let listObject: [String: JSONValue] = [
            "event": "ok", "cmd": "list",
            "friends": [
                [
                    "friendId": .string(b), "name": "Bob", "statusMessage": "x", "status": "busy", "isOnline": true,
                    "paths": [["kind": "directUDP", "endpoint": "e", "rtt": .double(0.5)]], "presence": "online",
                ]
            ],
        ]
        #expect(NodeEvent.ok(NodeReply(cmd: "list", result: .friends([friend]))).line == JSONValue.object(listObject).sortedLine)
    }

    /// What a reader of the lines can rely on: unknown keys are skipped, anything else that is
    /// not one of the events is an error.
    @Test func readingIsStrictAboutEventsAndLenientAboutExtraKeys() throws {
        let b = Self.bob
        #expect(
            try NodeEvent(line: #"{"event":"didUpdateName","friendId":"\#(b)","name":"Bob","later":[1]}"#)
                == .didUpdateName(friendId: b, name: "Bob"))
        // A missing null reads as nil, as an explicit one does.
        #expect(
            try NodeEvent(line: #"{"event":"didReceiveInvitation","friendId":"F"}"#)
                == .didReceiveInvitation(friendId: "F", message: nil))
        // The room layer picks the room event of a shared name.
        #expect(
            try NodeEvent(line: #"{"event":"didUpdateName","friendId":"F","isLocal":false,"layer":"room","name":null}"#)
                == .room(.didUpdateName(NodeParticipant(friendId: "F", isLocal: false), name: nil)))
        // An ok reply is read by its command.
        #expect(try NodeEvent(line: #"{"cmd":"hangup","event":"ok"}"#) == .ok(NodeReply(cmd: "hangup")))
        #expect(
            try NodeEvent(line: #"{"cmd":"mute","event":"ok","id":null,"sid":"audio"}"#)
                == .ok(NodeReply(cmd: "mute", result: .track(sid: "audio"))))
        for bad in [
            "", "not json", "[1]", #"{"cmd":"list"}"#, #"{"event":"nope"}"#, #"{"event":7}"#,
            #"{"event":"didUpdateName","friendId":"F"}"#, #"{"event":"didUpdateName","friendId":"F","name":3}"#,
            #"{"event":"didUpdateStatus","friendId":"F","status":"dnd"}"#,
            #"{"event":"didUpdateStatus","friendId":"F","status":1}"#,
            #"{"event":"roomDidStartCall","layer":"friend"}"#, #"{"event":"ready","mode":"relay","port":1}"#,
            #"{"event":"ready","mode":"rendezvous","port":1,"turn":[]}"#,
            #"{"address":"A","event":"ready","lan":false,"mode":"peer","port":70000,"revueId":"R"}"#,
            #"{"cmd":"nope","event":"ok"}"#, #"{"cmd":"address","event":"ok"}"#, #"{"event":"error"}"#,
            #"{"event":"participantDidConnect","friendId":"F","layer":"room","mode":"sendAndRecv"}"#,
            #"{"error":"other","event":"callDidFailWithError","layer":"room"}"#,
            #"{"event":"participantDidDisconnect","friendId":"F","isLocal":false,"layer":"room","reason":"gone"}"#,
        ] {
            #expect(throws: DecodingError.self, "\(bad)") { try NodeEvent(line: bad) }
        }
    }

    /// A bad command line's error event, as revue-node prints it.
    @Test func commandLineErrorsAreErrorEvents() throws {
        guard case .error(let e) = NodeCommandLine.parse(#"{"cmd":"accept","id":"x"}"#) else {
            Issue.record("no error")
            return
        }
        #expect(
            e.event == .error(NodeErrorReply(cmd: "accept", id: NodeCommandID("x"), error: "missingField", field: "friendId")))
        #expect(e.event.line == #"{"cmd":"accept","error":"missingField","event":"error","field":"friendId","id":"x"}"#)
        guard case .error(let invalid) = NodeCommandLine.parse("[]") else {
            Issue.record("no error")
            return
        }
        #expect(
            invalid.event.line
                == #"{"detail":"each line must be a JSON object with a \"cmd\" string","error":"invalidCommand","event":"error"}"#
        )
    }

    /// docs/revue-node.md names every event, and every key any event line has.
    @Test func theProtocolDocumentNamesEveryEventAndField() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/revue-node.md"), encoding: .utf8)
        func keys(_ value: JSONValue) -> Set<String> {
            switch value {
            case .object(let o): Set(o.keys).union(o.values.flatMap(keys))
            case .array(let a): Set(a.flatMap(keys))
            default: []
            }
        }
        var names: Set<String> = []
        for event in Self.samples {
            names.insert(event.name)
            let line = try #require(event.line)
            var object = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
            // The path diagnostics are the engine's, documented by example; `results` is keyed by friend ID.
            if case .object(var o) = object {
                o["participants"] = o["participants"].map { p in
                    .array((p.array ?? []).map { $0.setting("path", .null) })
                }
                o["results"] = nil
                o["id"] = nil
                object = .object(o)
            }
            names.formUnion(keys(object))
        }
        let missing = names.filter { !doc.contains("`\($0)`") }.sorted()
        #expect(missing.isEmpty, "docs/revue-node.md does not name \(missing)")
    }

    /// Lines revue-node wrote before its events had a type, one of each kind it printed in a
    /// three-peer call on loopback (every command, its errors, bad lines, invitations, room
    /// events, `feed`, `media-stats` with its paths, `room`) and a rendezvous node's `ready`: each
    /// reads as an event and is written back byte for byte.
    @Test func recordedLinesReadAndWriteBackUnchanged() throws {
        let lines = Self.recorded.split(separator: "\n").map(String.init)
        #expect(lines.count == 68)
        for line in lines {
            let event = try NodeEvent(line: line)
            #expect(event.line == line)
        }
    }

    static let recorded = #"""
        {"event":"ready","mode":"rendezvous","port":57390,"turn":["127.0.0.1:3478","127.0.0.1:3478?transport=tcp"],"turnLifetime":3600}
        {"event":"didUpdateName","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","name":"a"}
        {"event":"didUpdateIsDiscoverable","isDiscoverable":true}
        {"address":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F7EBFC0D47257","cmd":"address","event":"ok","id":"t1796625335.949359","nospam":2126495956,"port":57759,"revueId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F"}
        {"cmd":"add-friend","event":"ok","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","id":"t1796625336.000157"}
        {"event":"didUpdatePaths","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","isOnline":true,"paths":[{"endpoint":"127.0.0.1:52088","kind":"directLAN"},{"endpoint":"127.0.0.1:57759","kind":"directLAN","rtt":0.007206}]}
        {"cmd":"add-friend","error":"alreadyExists","event":"error","id":"t1796625336.3044116"}
        {"cmd":"add-friend","error":"invalidAddress","event":"error","id":"t1796625336.3048372"}
        {"cmd":"set-name","event":"ok","id":"t1796625336.3550231"}
        {"cmd":"set-status-message","event":"ok","id":"t1796625336.4057097"}
        {"event":"didUpdateStatusMessage","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","statusMessage":"busy day"}
        {"cmd":"set-status","event":"ok","id":"t1796625336.4565117"}
        {"event":"didUpdateStatus","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","status":"away"}
        {"address":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F0000303950D3","cmd":"set-nospam","event":"ok","id":"t1796625336.506777"}
        {"cmd":"message","event":"ok","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","id":"t1796625336.5574298","messageId":1}
        {"cmd":"message","error":"friendNotFound","event":"error","friendId":"0000000000000000000000000000000000000000000000000000000000000000","id":"t1796625336.6080494"}
        {"cmd":"list","event":"ok","friends":[{"friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isOnline":true,"name":"b","paths":[{"endpoint":"127.0.0.1:55615","kind":"directLAN","rtt":0.000727},{"endpoint":"127.0.0.1:48900","kind":"directLAN","rtt":0.000914}],"presence":"online","status":"none","statusMessage":""},{"friendId":"3EDBC9DB4AE07A84C5AC991F54B529F2E0270209B2B11CF4B975A5497A46016E","isOnline":true,"name":"c","paths":[{"endpoint":"127.0.0.1:56984","kind":"directLAN","rtt":0.000554},{"endpoint":"127.0.0.1:43021","kind":"directLAN","rtt":0.000488}],"presence":"online","status":"none","statusMessage":""}],"id":"t1796625336.658601"}
        {"callSignalsRefused":0,"candidatesDropped":0,"cmd":"counters","cookieRepliesSent":0,"droppedAnnounces":0,"droppedExpired":0,"droppedForged":0,"droppedLookupReplies":0,"droppedMalformed":0,"droppedNonFriend":0,"droppedOverload":0,"droppedRateLimited":0,"droppedReplayed":0,"droppedUnknownSession":0,"droppedWrongNospam":0,"duplicatesSuppressed":2,"event":"ok","friendRequestsReceived":0,"handshakesCompleted":2,"id":"t1796625336.7088678","initiationsThrottled":0,"requestsForgotten":0,"reservedMessagesSwallowed":2,"turnCredentialsReceived":1,"turnCredentialsRequested":1}
        {"detail":"each line must be a JSON object with a \"cmd\" string","error":"invalidCommand","event":"error"}
        {"cmd":"nope","error":"unknownCommand","event":"error","id":[1,{"a":null}]}
        {"cmd":"accept","error":"missingField","event":"error","field":"friendId","id":2.5}
        {"cmd":"set-status","error":"invalidStatus","event":"error"}
        {"cmd":"mode","error":"invalidMode","event":"error"}
        {"cmd":"hangup","error":"notInCall","event":"error","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","id":"t1796625336.7593548"}
        {"cmd":"mute","error":"notPublished","event":"error","id":"t1796625336.80956","sid":"audio"}
        {"cmd":"feed","error":"notPublished","event":"error","id":"t1796625336.8598297"}
        {"cmd":"cancel-call","error":"invalidState","event":"error","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","id":"t1796625336.910078"}
        {"cmd":"invite","event":"ok","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","id":"t1796625336.9603295"}
        {"event":"didSendInvitation","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","message":"1"}
        {"event":"didEndInvitation","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","reason":"finished"}
        {"event":"roomDidStartCall","layer":"room"}
        {"event":"participantDidConnect","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"layer":"room","mode":"sendAndRecv"}
        {"event":"didPublishTrack","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","isLocal":true,"kind":"audio","layer":"room","sid":"audio"}
        {"event":"didSubscribeTrack","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"kind":"audio","layer":"room","sid":"audio"}
        {"event":"didUpdateConnectionQuality","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"layer":"room","quality":"excellent"}
        {"event":"didReceiveMessage","friendId":"3EDBC9DB4AE07A84C5AC991F54B529F2E0270209B2B11CF4B975A5497A46016E","isLocal":false,"layer":"room","message":"hello from c"}
        {"audioSamplesFed":96000,"cmd":"feed","event":"ok","id":"t1796625337.367775","maxLagMilliseconds":0,"videoFramesFed":34}
        {"cmd":"media-stats","event":"ok","id":"t1796625339.8756993","participants":[{"audioSamples":129120,"friendId":"3EDBC9DB4AE07A84C5AC991F54B529F2E0270209B2B11CF4B975A5497A46016E","loudSamples":0,"path":{"candidates":["host 127.0.0.1:39181"],"checksAnswered":12,"checksSent":11,"droppedRequests":0,"droppedResponses":0,"local":"host 127.0.0.1:39181","localType":"host","pairs":["host 127.0.0.1:39181 -> host 127.0.0.1:56984 valid selected"],"received":{"authFailures":0,"datagrams":75,"other":49,"rtcp":26,"rtp":0,"unknownStream":0},"relayed":false,"remote":"host 127.0.0.1:56984","remoteType":"host","responsesReceived":11,"route":"direct 127.0.0.1:56984","selectedPairChanges":1,"sent":306,"sessionOnLink":true,"turn":["TURNClientStatistics(received: 0, responsesAccepted: 0, unmatchedResponses: 0, forgedResponses: 0, malformed: 0, ignored: 0, peerDataDelivered: 0, peerDataDropped: 0, requestsSent: 1, retransmissions: 3, timeouts: 0, allocationRefreshes: 0, staleNonceRetries: 0, sendIndicationsSent: 0, channelDataSent: 0, sendFailures: 0, refusedForLimits: 0, permissionFailures: 0, lastPermissionFailure: nil, addressFamiliesRefused: 0, lastAddressFamilyRefusal: nil, livenessProbes: 0, livenessProbesConfirmed: 0, allocationsLost: 0, lastAllocationLoss: nil)","TURNClientStatistics(received: 0, responsesAccepted: 0, unmatchedResponses: 0, forgedResponses: 0, malformed: 0, ignored: 0, peerDataDelivered: 0, peerDataDropped: 0, requestsSent: 0, retransmissions: 0, timeouts: 0, allocationRefreshes: 0, staleNonceRetries: 0, sendIndicationsSent: 0, channelDataSent: 0, sendFailures: 0, refusedForLimits: 0, permissionFailures: 0, lastPermissionFailure: nil, addressFamiliesRefused: 0, lastAddressFamilyRefusal: nil, livenessProbes: 0, livenessProbesConfirmed: 0, allocationsLost: 0, lastAllocationLoss: nil)"]},"videoFrames":0},{"audioSamples":131520,"friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","loudSamples":0,"path":{"candidates":["host 127.0.0.1:52088"],"checksAnswered":12,"checksSent":11,"droppedRequests":0,"droppedResponses":0,"local":"host 127.0.0.1:52088","localType":"host","pairs":["host 127.0.0.1:52088 -> host 127.0.0.1:55615 valid selected"],"received":{"authFailures":0,"datagrams":69,"other":42,"rtcp":27,"rtp":0,"unknownStream":0},"relayed":false,"remote":"host 127.0.0.1:55615","remoteType":"host","responsesReceived":11,"route":"direct 127.0.0.1:55615","selectedPairChanges":1,"sent":304,"sessionOnLink":true,"turn":["TURNClientStatistics(received: 0, responsesAccepted: 0, unmatchedResponses: 0, forgedResponses: 0, malformed: 0, ignored: 0, peerDataDelivered: 0, peerDataDropped: 0, requestsSent: 1, retransmissions: 4, timeouts: 0, allocationRefreshes: 0, staleNonceRetries: 0, sendIndicationsSent: 0, channelDataSent: 0, sendFailures: 0, refusedForLimits: 0, permissionFailures: 0, lastPermissionFailure: nil, addressFamiliesRefused: 0, lastAddressFamilyRefusal: nil, livenessProbes: 0, livenessProbesConfirmed: 0, allocationsLost: 0, lastAllocationLoss: nil)","TURNClientStatistics(received: 0, responsesAccepted: 0, unmatchedResponses: 0, forgedResponses: 0, malformed: 0, ignored: 0, peerDataDelivered: 0, peerDataDropped: 0, requestsSent: 0, retransmissions: 0, timeouts: 0, allocationRefreshes: 0, staleNonceRetries: 0, sendIndicationsSent: 0, channelDataSent: 0, sendFailures: 0, refusedForLimits: 0, permissionFailures: 0, lastPermissionFailure: nil, addressFamiliesRefused: 0, lastAddressFamilyRefusal: nil, livenessProbes: 0, livenessProbesConfirmed: 0, allocationsLost: 0, lastAllocationLoss: nil)"]},"videoFrames":0}],"uplinkBytes":462974,"videoSend":{"captured":34,"droppedFrameRate":0,"droppedPoolExhausted":0,"droppedRingFull":0,"framesDroppedByEncoder":0,"framesEncoded":34,"pacerOverflows":0,"targetBitrate":995048}}
        {"activeSpeakers":[],"cmd":"room","event":"ok","id":"t1796625339.9261332","mode":"sendAndRecv","participants":[{"connectionQuality":"poor","friendId":"3EDBC9DB4AE07A84C5AC991F54B529F2E0270209B2B11CF4B975A5497A46016E","isSpeaking":false,"mode":"sendAndRecv","name":"c","tracks":[{"isMuted":false,"isSubscribed":true,"kind":"audio","sid":"audio"},{"isMuted":false,"isSubscribed":true,"kind":"video","sid":"video"}]},{"connectionQuality":"poor","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isSpeaking":false,"mode":"sendAndRecv","name":"b","tracks":[{"isMuted":false,"isSubscribed":true,"kind":"audio","sid":"audio"},{"isMuted":false,"isSubscribed":true,"kind":"video","sid":"video"}]}],"tracks":[{"isMuted":false,"kind":"audio","sid":"audio"},{"isMuted":false,"kind":"video","sid":"video"}]}
        {"cmd":"mute","event":"ok","id":"t1796625340.129599","sid":"audio"}
        {"cmd":"unmute","event":"ok","id":"t1796625340.1312997","sid":"audio"}
        {"cmd":"mute-request","event":"ok","id":"t1796625340.1324542"}
        {"cmd":"mute-request","error":"notInCall","event":"error","id":"t1796625340.133143"}
        {"cmd":"subscribe","event":"ok","id":"t1796625340.1332724"}
        {"event":"didUnsubscribeTrack","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"kind":"video","layer":"room","sid":"video"}
        {"cmd":"subscribe","error":"notFound","event":"error","id":"t1796625340.1337893"}
        {"cmd":"camera","event":"ok","id":"t1796625340.1339774"}
        {"event":"didUnpublishTrack","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","isLocal":true,"kind":"video","layer":"room","sid":"video"}
        {"cmd":"mic","event":"ok","id":"t1796625340.1843522"}
        {"event":"didUpdateMode","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"layer":"room","mode":"recvOnly"}
        {"event":"participantDidDisconnect","friendId":"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435","isLocal":false,"layer":"room","reason":"remoteHangUp"}
        {"event":"roomDidEndCall","layer":"room"}
        {"cmd":"delete","event":"ok","friendId":"3EDBC9DB4AE07A84C5AC991F54B529F2E0270209B2B11CF4B975A5497A46016E","id":"t1796625341.9391782"}
        {"cmd":"delete","error":"notFound","event":"error","id":"t1796625341.98959"}
        {"cmd":"invite","error":"friendNotFound","event":"error","friendId":"zz","id":"t1796625342.0401778"}
        {"cmd":"quit","event":"ok","id":"t1796625342.5407677"}
        {"event":"didReceiveFriendRequest","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","message":"hi"}
        {"cmd":"accept","event":"ok","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","id":"t1796625336.0512123"}
        {"event":"didReceiveMessage","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","message":"m1"}
        {"event":"didReceiveInvitation","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","message":"1"}
        {"cmd":"reject-call","event":"ok","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","id":"t1796625337.0105848"}
        {"cmd":"accept-call","event":"ok","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","id":"t1796625337.0626786"}
        {"event":"didUpdateIsMuted","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","isLocal":false,"isMuted":true,"layer":"room","sid":"audio"}
        {"event":"didReceiveMuteRequest","friendId":"666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F","isLocal":false,"isMuted":true,"layer":"room"}
        {"cmd":"mode","event":"ok","id":"t1796625340.2346814","mode":"recvOnly"}
        {"cmd":"mode","error":"alreadyInRequestedState","event":"error","id":"t1796625340.2865512"}
        {"cmd":"hangup","event":"ok","id":"t1796625341.337673"}
        {"cmd":"call-message","event":"ok","id":"t1796625337.267005","results":{"62F948D8F0FB7D8B20E72B214E6BE6EFDD4CFBB5231EF7319902F4FAE2E8E435":"delivered","666CB92A6A1D63829E34EF0B2C5174ABE4A921C30D8E453552E2C4C3AA31D70F":"delivered"}}
        """#
}
