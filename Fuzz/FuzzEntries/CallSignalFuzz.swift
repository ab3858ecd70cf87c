import Dispatch
import Foundation
import MediaCore
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

extension FuzzEntries {
    /// The call signalling state machine (`Room` and its handling of the reserved call messages,
    /// docs/session.md "Calls") driven by arbitrary sequences of messages from arbitrary friends.
    /// The input is a sequence of `[length: UInt16 BE][record]` records; each record's first byte
    /// picks the friend (one of four, all with a live session) and what happens:
    /// - a call signal built from the record's bytes (type, op, an invitation or introduction token
    ///   from the ones seen so far or a fixed one, a friend ID as text, members, mode, track fields,
    ///   epoch, introductions), handled by the real `Room` as if it came on that friend's stream;
    /// - the record's bytes as raw text, through the same decoder and handler;
    /// - a local API call (invite, accept, reject, cancel, hang up with one, hang up with all);
    /// - time passing (the room's timer run up to a minute ahead), a friend going offline or coming
    ///   back, a friend being deleted (the call layer's part of it).
    /// The room runs without media legs (`RoomEnvironment.mediaLegs`), in `signallingOnly` mode.
    /// Properties (a violation traps through `fuzzRequire`):
    /// - a participant connects only for a valid reason: the friend accepted our open invitation,
    ///   confirmed the one we accepted, answered a `join` we sent, or joined with a token a current
    ///   participant introduced it with (the `join` before or after the introduction), never used;
    /// - every invitation ends at most once (one `didEndInvitation` or `participantDidConnect`), an
    ///   invitation event never starts a second one with the same friend, and when the input is over
    ///   and every deadline has passed, every invitation has ended exactly once;
    /// - what the room holds stays under its caps (participants, publications per participant,
    ///   introductions, used tokens, held and pending joins, invitations);
    /// - raw text the decoder reads as a call signal writes back to the same signal.
    /// Thread rule: runs on the main thread (libFuzzer calls from it); from another thread it hops
    /// there with `DispatchQueue.main.sync` (the regression tests).
    /// Cost: per record one JSON encode and decode and the room's handling; no I/O.
    @Sendable public static func callSignal(_ data: UnsafeRawBufferPointer) {
        let records = fuzzRecords(data, limit: 96).map { [UInt8]($0) }
        onMainActor { CallSignalHarness.shared.run(records) }
        // As in `session`: run the main run loop once so the main-queue work this input left is
        // freed now (libFuzzer never returns to the run loop).
        if Thread.isMainThread { _ = RunLoop.main.run(mode: .default, before: Date()) }
    }

    /// Seed inputs for fuzz-call-signal: each element is one input (a name and its records):
    /// invitations answered every way, introductions before and after the join, refused joins,
    /// a publication flood, restarts, raw JSON.
    public static func callSignalSeeds() -> [(String, [[UInt8]])] {
        // Records: [control][fields...]. control = friend | what << 2.
        func signal(
            _ friend: UInt8, type: UInt8 = 0, _ op: String, inv: UInt8 = 0x80, text: UInt8 = 5, members: UInt8 = 0,
            mode: UInt8 = 0, sid: UInt8 = 0, sidByte: UInt8 = 0, kind: UInt8 = 0, flags: UInt8 = 0,
            intros: [UInt8] = []
        ) -> [UInt8] {
            let opIndex = UInt8(CallSignalHarness.ops.firstIndex(of: op)!)
            var fields: [UInt8] = [type, opIndex, inv, text, members, mode, sid, sidByte, kind, flags, 0, 0]
            if !intros.isEmpty { fields += [intros[0]] + Array(intros.dropFirst()) }
            return [friend] + fields
        }
        func api(_ friend: UInt8, _ action: UInt8) -> [UInt8] { [friend | 4 << 2, action] }
        func tick(_ quarterSeconds: UInt8) -> [UInt8] { [5 << 2, quarterSeconds] }
        let const1: UInt8 = 0x81, const2: UInt8 = 0x82
        // F0 invited by us and accepting (the inv we sent is the first token seen: pool index 0).
        let inviteF0 = [api(0, 0), signal(0, "accept", inv: 0, mode: 1)]
        // F0 invites us and we accept, then F0 confirms.
        let invitedByF0 = [signal(0, "invite", inv: const2, text: 6), api(0, 1), signal(0, "connect", inv: const2, mode: 1)]
        let raw = Array(#"{"type":"msg","op":"invite","inv":"00000000000000AA","text":"raw"}"#.utf8)
        let rawTrack = Array(#"{"type":"track","op":"publish","sid":"audio","kind":"audio","muted":false}"#.utf8)
        return [
            ("invite-accept", inviteF0 + [signal(0, "chat", text: 6), signal(0, "hangup")]),
            (
                "invite-reject-cancel-timeout",
                [
                    api(0, 0), signal(0, "reject", inv: 0), api(1, 0), api(1, 3),
                    api(2, 0), tick(200), signal(3, "invite", inv: const1), tick(255),
                ]
            ),
            ("invited-accept-connect", invitedByF0 + [signal(0, "mode", mode: 2), signal(0, "mute-request", flags: 1)]),
            (
                "introduced-join",
                inviteF0 + [
                    signal(0, "introduce", inv: const1, text: 1), signal(1, "join", inv: const1, mode: 1),
                    signal(2, "join", inv: const1), signal(1, "join", inv: const1),
                ]
            ),
            ("held-join", inviteF0 + [signal(1, "join", inv: const1), signal(0, "introduce", inv: const1, text: 1)]),
            (
                "refused-joins",
                inviteF0 + [
                    signal(2, "join", inv: const2), signal(2, "joined"), signal(3, "introduce", inv: const2, text: 2),
                    signal(0, "introduce", inv: const2, text: 0), tick(20),
                ]
            ),
            (
                "intros-and-joined",
                invitedByF0 + [signal(0, "intros", intros: [0b0110, 0, const1, const2]), signal(1, "joined", mode: 1)]
            ),
            (
                "publication-flood",
                inviteF0 + (0..<40).map { signal(0, type: 2, "publish", sid: 4, sidByte: UInt8($0), kind: UInt8($0 % 2)) }
                    + [
                        signal(0, type: 2, "publish", sid: 5), signal(0, type: 2, "unpublish", sid: 4, sidByte: 3),
                        signal(0, type: 2, "mute", sid: 1, flags: 1),
                    ]
            ),
            (
                "restart-and-offline",
                inviteF0 + [
                    signal(0, "hello", flags: 0), signal(0, "hello", flags: 1), invitedByF0[0], [0 | 6 << 2, 0],
                    [1 | 7 << 2],
                ]
            ),
            ("raw-json", [[0 | 3 << 2] + raw, api(0, 1), [0 | 3 << 2] + rawTrack, [1 | 3 << 2] + Array("{not json".utf8)]),
            ("both-invite", [api(0, 0), signal(0, "invite", inv: const1), signal(0, "end", inv: 0), api(0, 5)]),
        ]
    }
}

/// Invitation, connection and disconnection events of the fuzzed room, in order.
@MainActor
final class CallSignalEvents: RevueDelegate, RoomDelegate {
    enum Event: Equatable {
        case sent(String)
        case received(String)
        case ended(String)
        case connected(String)
        case disconnected(String)
    }
    var events: [Event] = []
    func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) { events.append(.sent(friendId)) }
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
        events.append(.received(friendId))
    }
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {
        events.append(.ended(friendId))
    }
    func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {
        events.append(.connected(participant.identity))
    }
    func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) {
        events.append(.disconnected(participant.identity))
    }
}

/// The real `Revue` instance whose room the fuzz inputs drive (see `FuzzEntries.callSignal`).
@MainActor
final class CallSignalHarness {
    static let shared = CallSignalHarness()

    /// Every op the room knows, and one it does not.
    nonisolated static let ops = [
        "invite", "cancel", "reject", "end", "accept", "connect", "join", "joined", "hangup", "chat", "mute-request",
        "mode", "publish", "unpublish", "mute", "subscribe", "speaking", "media", "candidates", "introduce", "intros",
        "hello", "bogus",
    ]
    nonisolated static let types = ["msg", "msg", "track", "adr"]
    nonisolated static let modes: [String?] = [nil, "sendAndRecv", "recvOnly", "signallingOnly"]
    /// Tokens a record can name without having seen them (byte with the high bit set).
    nonisolated static let fixedTokens: [String?] = [
        nil, "0000000000000001", "0000000000000002", String(repeating: "7", count: 40),
    ]

    let revue = Revue()
    let core: SessionCore
    let room: Room
    let recorder = CallSignalEvents()
    /// The four friends' IDs (fixed keys).
    let friendIds: [String]

    /// What the room may legitimately do, from what it was sent and what it sent (per input).
    enum Invitation: Equatable {
        /// We invited with this token (nil: not sent yet).
        case outgoing(String?)
        /// We were invited with this token; `accepted` once we sent our accept.
        case incoming(String?, accepted: Bool)
    }
    var open: [String: Invitation] = [:]
    /// Introductions a participant (at that time) made to us: token -> (newcomer, introducer).
    var introductions: [String: (newcomer: String, introducer: String)] = [:]
    var usedTokens: Set<String> = []
    /// Tokens each friend sent us in a `join`; friends we sent a `join` to.
    var joinTokens: [String: Set<String>] = [:]
    var joinsSent: Set<String> = []
    /// Tokens seen in signals either way, for records to name.
    var pool: [String] = []

    init() {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let dir = base + "/revue-fuzz-call-signal-\(getpid())"
        callSignalDataDirectory = dir
        atexit { if let d = callSignalDataDirectory { try? FileManager.default.removeItem(atPath: d) } }
        try? FileManager.default.removeItem(atPath: dir)
        var configuration = RevueConfiguration(dataDirectory: dir)
        configuration.bindHost = "127.0.0.1"
        do { try revue.initialize(configuration) } catch { fatalError("fuzz-call-signal: cannot start: \(error)") }
        core = revue.core!
        room = revue.room
        friendIds = (0..<4).map { i in Hex.encode(KeyPair(secret: (0..<32).map { UInt8($0) &* 11 &+ UInt8(i) &+ 3 }).publicKey) }
        for id in friendIds { _ = try! revue.friends.addFriendNorequest(friendId: id) }
        room.environment.mediaLegs = false
        room.options.mode = .signallingOnly
        room.options.micEnabled = false
        room.options.cameraEnabled = false
        revue.delegates.add(delegate: recorder)
        room.delegates.add(delegate: recorder)
        reset()
    }

    /// An idle room, every friend with a live session and nothing queued, an empty model.
    func reset() {
        room.resetForFuzzing()
        for id in friendIds {
            core.connectForFuzzing(friendId: id)
            _ = core.takeReservedForFuzzing(friendId: id)
        }
        core.drainEvents()
        recorder.events = []
        open = [:]
        introductions = [:]
        usedTokens = []
        joinTokens = [:]
        joinsSent = []
        pool = []
    }

    func remember(_ token: String?) {
        guard let token, !pool.contains(token) else { return }
        pool.append(token)
        if pool.count > 32 { pool.removeFirst() }
    }

    func token(_ b: UInt8) -> String? {
        if b & 0x80 != 0 { return Self.fixedTokens[Int(b & 0x7F) % Self.fixedTokens.count] }
        return pool.isEmpty ? nil : pool[Int(b) % pool.count]
    }

    /// A call signal from a record's bytes, as JSON text.
    func build(_ b: [UInt8]) -> String {
        func at(_ i: Int) -> UInt8 { i < b.count ? b[i] : 0 }
        var o: [String: Any] = ["type": Self.types[Int(at(0)) % Self.types.count], "op": Self.ops[Int(at(1)) % Self.ops.count]]
        o["inv"] = token(at(2))
        let texts: [String?] = friendIds + [revue.revueId, nil, "hi", String(repeating: "t", count: 200)]
        o["text"] = texts[Int(at(3)) % texts.count]
        if at(4) != 0 { o["members"] = friendIds.indices.filter { at(4) >> $0 & 1 == 1 }.map { friendIds[$0] } }
        o["mode"] = Self.modes[Int(at(5)) % Self.modes.count]
        let sids: [String?] = [nil, "audio", "video", "bad", "s\(at(7))", String(repeating: "s", count: 65)]
        o["sid"] = sids[Int(at(6)) % sids.count]
        o["kind"] = ["audio", "video", nil, "screen"][Int(at(8)) % 4]
        let flags = at(9)
        if flags & 1 != 0 { o["muted"] = flags & 2 != 0 }
        if flags & 4 != 0 { o["subscribed"] = flags & 8 != 0 }
        if flags & 16 != 0 { o["speaking"] = flags & 32 != 0; o["level"] = Double(at(10)) / 255 }
        o["epoch"] = "E\(flags & 1)\(at(11) % 3)"
        if at(12) != 0 {
            var intros: [String: String] = [:]
            for i in friendIds.indices where at(12) >> i & 1 == 1 { intros[friendIds[i]] = token(at(13 + i)) ?? "" }
            intros[revue.revueId] = at(12) & 0x80 != 0 ? token(at(17)) : nil
            o["intros"] = intros
        }
        let data = try! JSONSerialization.data(withJSONObject: o, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// One fuzz input.
    func run(_ records: [[UInt8]]) {
        reset()
        for record in records where !record.isEmpty { step(record) }
        // Every deadline passes: each invitation still open must end now, exactly once.
        room.tickForFuzzing(ahead: .seconds(10_000))
        settle(fed: nil, from: nil, before: room.participantIds)
        fuzzRequire(open.isEmpty, "invitations never ended: \(open)")
        fuzzRequire(room.stateCounts.invitations == 0, "the room still holds invitations after every deadline")
        reset()
    }

    func step(_ record: [UInt8]) {
        let friend = friendIds[Int(record[0] & 3)]
        let body = Array(record.dropFirst())
        let before = room.participantIds
        var fed: CallSignalSummary?
        switch record[0] >> 2 & 7 {
        case 0, 1, 2:
            let text = build(body)
            fed = SessionCore.callSignalSummary(text)
            room.receiveForFuzzing(text, from: friend)
        case 3:
            let text = String(decoding: body, as: UTF8.self)
            if let same = SessionCore.callSignalRoundTrips(text) {
                fuzzRequire(same, "a decoded call signal does not write back to itself")
            }
            fed = SessionCore.callSignalSummary(text)
            room.receiveForFuzzing(text, from: friend)
        case 4:
            switch (body.first ?? 0) % 6 {
            case 0: try? revue.friends.sendInvitation(friendId: friend, message: "m")
            case 1: try? revue.friends.acceptInvitation(friendId: friend)
            case 2: try? revue.friends.rejectInvitation(friendId: friend)
            case 3: try? revue.friends.cancelInvitation(friendId: friend)
            case 4: room.remoteParticipants[friend]?.disconnect()
            default: room.disconnectAll()
            }
        case 5: room.tickForFuzzing(ahead: .milliseconds(250) * Int(body.first ?? 0))
        case 6: room.pathsChangedForFuzzing(friend, online: (body.first ?? 0) & 1 == 1)
        default: room.endForDeletionForFuzzing(friend)
        }
        if let fed {
            remember(fed.inv)
            if fed.type == "msg", fed.op == "join", let t = fed.inv { joinTokens[friend, default: []].insert(t) }
        }
        settle(fed: fed, from: friend, before: before)
        // Bounded state.
        let c = room.stateCounts
        fuzzRequire(
            c.participants <= friendIds.count && c.invitations <= friendIds.count && c.heldJoins <= friendIds.count
                && c.pendingJoins <= friendIds.count && c.unknownCallAnswered <= friendIds.count
                && c.friendEpochs <= friendIds.count,
            "per-friend state beyond one entry per friend: \(c)")
        fuzzRequire(
            c.mostPublications <= Room.remotePublicationLimit, "\(c.mostPublications) publications kept for one participant")
        fuzzRequire(
            c.introductions <= Room.introductionLimit && c.usedIntroductions <= 128, "introductions beyond their caps: \(c)")
        // Introductions made to us by a participant of that moment (the model's, more lenient than the room's).
        if let fed, fed.type == "msg", fed.op == "introduce", let from = Optional(friend), before.contains(from),
            let t = fed.inv, let newcomer = fed.text, newcomer != from
        {
            // A member may vouch again with a token it used before: a new introduction.
            introductions[t] = (newcomer, from)
            usedTokens.remove(t)
        }
    }

    /// Delivers the queued events, checks each against the model, then notes what the room sent.
    func settle(fed: CallSignalSummary?, from sender: String?, before: Set<String>) {
        core.drainEvents()
        var sent: [String: [CallSignalSummary]] = [:]
        for id in friendIds {
            sent[id] = core.takeReservedForFuzzing(friendId: id).compactMap { SessionCore.callSignalSummary($0) }
        }
        let events = recorder.events
        recorder.events = []
        for e in events {
            switch e {
            case .received(let x):
                fuzzRequire(open[x] == nil, "a second invitation with one friend")
                fuzzRequire(
                    sender == x && fed?.type == "msg" && fed?.op == "invite",
                    "an invitation received without an invite from that friend")
                open[x] = .incoming(fed?.inv, accepted: false)
            case .sent(let x):
                fuzzRequire(open[x] == nil, "a second invitation with one friend")
                open[x] = .outgoing(sent[x]?.first { $0.op == "invite" }?.inv)
            case .ended(let x):
                fuzzRequire(open[x] != nil, "an invitation ended that was not in progress (or ended twice)")
                open[x] = nil
            case .connected(let x):
                fuzzRequire(
                    justified(x, fed: fed, from: sender, before: before),
                    "\(x.prefix(8)) connected without a valid invitation or introduction")
                open[x] = nil
                joinsSent.remove(x)
            case .disconnected:
                break
            }
        }
        for (id, signals) in sent {
            for s in signals where s.type == "msg" {
                remember(s.inv)
                for t in (s.intros ?? [:]).values { remember(t) }
                switch s.op {
                case "invite": if case .outgoing(nil)? = open[id] { open[id] = .outgoing(s.inv) }
                case "accept":
                    if case .incoming(let inv, _)? = open[id], inv == s.inv { open[id] = .incoming(inv, accepted: true) }
                case "join": joinsSent.insert(id)
                default: break
                }
            }
        }
    }

    /// Whether `x` joining the call now has a reason the protocol allows (see `FuzzEntries.callSignal`).
    func justified(_ x: String, fed: CallSignalSummary?, from sender: String?, before: Set<String>) -> Bool {
        guard let fed, fed.type == "msg", let sender else { return false }
        if sender == x {
            switch fed.op {
            case "accept":
                if case .outgoing(let inv)? = open[x], inv != nil, inv == fed.inv { return true }
            case "connect":
                if case .incoming(let inv, true)? = open[x], inv != nil, inv == fed.inv { return true }
            case "joined":
                return joinsSent.contains(x)
            case "join":
                guard let t = fed.inv, let intro = introductions[t], intro.newcomer == x, before.contains(intro.introducer),
                    usedTokens.insert(t).inserted
                else { return false }
                return true
            default:
                return false
            }
            return false
        }
        // An introduction that releases the newcomer's held join.
        guard fed.op == "introduce", before.contains(sender), fed.text == x, let t = fed.inv,
            joinTokens[x]?.contains(t) == true, usedTokens.insert(t).inserted
        else { return false }
        return true
    }
}

/// The harness's data directory, removed at exit.
nonisolated(unsafe) var callSignalDataDirectory: String?
