import MediaCore
import Testing

@testable import RevueSession

/// The introduction state machine driven directly, at fixed times, with a recording of what it
/// sends and refuses: newcomers introduced to every member, members that cannot be reached owed
/// their introduction, joins let in once, held, cut off and refused.
@Suite struct RoomIntroductionsMachineTests {
    /// What the machine sent and refused, in order, and which friends can be reached.
    final class Wire {
        var sent: [(to: String, signal: CallSignal)] = []
        var refused: [(id: String, answer: Bool)] = []
        var unreachable: Set<String> = []
        var tokens = 0

        var effects: RoomIntroductions.Effects {
            RoomIntroductions.Effects(
                send: { s, id in
                    guard !self.unreachable.contains(id) else { return false }
                    self.sent.append((id, s))
                    return true
                },
                refuse: { id, answer in self.refused.append((id, answer)) },
                newToken: {
                    self.tokens += 1
                    return "T\(self.tokens)"
                })
        }

        func context(_ participants: Set<String>) -> RoomIntroductions.Context {
            RoomIntroductions.Context(
                ownId: "ME", participants: participants, mode: "sendAndRecv", invitationTimeout: .seconds(30),
                isFriend: { $0 != "STRANGER" }, isReachable: { !self.unreachable.contains($0) }, isInvited: { $0 == "INVITED" })
        }

        /// The sent messages as "to op token text intros".
        var lines: [String] {
            sent.map { to, s in
                let intros = (s.intros ?? [:]).sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }.joined(
                    separator: ",")
                return [to, s.op, s.inv ?? "-", s.text ?? "-", intros].joined(separator: " ")
            }
        }
    }

    static func at(_ seconds: Double) -> MonotonicTime { .zero + .seconds(seconds) }
    static let hold = Duration.seconds(3)

    @Test func aNewcomerIsIntroducedToEveryMember() {
        let wire = Wire()
        var m = RoomIntroductions()
        m.introduce("N", now: Self.at(0), context: wire.context(["M1", "M2", "N"]), effects: wire.effects)
        #expect(wire.lines == ["M1 introduce T1 N ", "M2 introduce T2 N ", "N intros - - M1=T1,M2=T2"])
        #expect(!m.owesIntroductions)
    }

    @Test func aMemberOfflineWhileIntroducedIsIntroducedOnceReachable() {
        let wire = Wire()
        var m = RoomIntroductions()
        let call: Set<String> = ["M1", "M2", "N"]
        wire.unreachable = ["M2"]
        m.introduce("N", now: Self.at(0), context: wire.context(call), effects: wire.effects)
        #expect(wire.lines == ["M1 introduce T1 N ", "N intros - - M1=T1"])
        #expect(m.owedNewcomers == ["N"])
        m.tick(now: Self.at(1), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        #expect(wire.sent.count == 2)
        wire.unreachable = []
        m.tick(now: Self.at(2), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        // A fresh token: the one drawn for the send that failed is never used.
        #expect(wire.lines.suffix(2) == ["M2 introduce T3 N ", "N intros - - M2=T3"])
        #expect(!m.owesIntroductions)
        m.tick(now: Self.at(3), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        #expect(wire.sent.count == 4)
    }

    @Test func anOwedIntroductionIsCutOffByTimeOrALeavingMember() {
        let wire = Wire()
        var m = RoomIntroductions()
        wire.unreachable = ["M2", "M3"]
        m.introduce("N", now: Self.at(0), context: wire.context(["M1", "M2", "M3", "N"]), effects: wire.effects)
        wire.unreachable = []
        // M3 left; M2's introduction is past the invitation timeout.
        m.tick(now: Self.at(30.1), holdLimit: Self.hold, context: wire.context(["M1", "M2", "N"]), effects: wire.effects)
        #expect(wire.lines == ["M1 introduce T1 N ", "N intros - - M1=T1"])
        #expect(!m.owesIntroductions)
    }

    @Test func aJoinWithItsIntroductionIsLetInOnce() {
        let wire = Wire()
        var m = RoomIntroductions()
        let call: Set<String> = ["M1"]
        #expect(
            m.receiveIntroduction(
                intro("T9", for: "N"), from: "M1", now: Self.at(0), context: wire.context(call), effects: wire.effects)
                == nil)
        let admitted = m.receiveJoin(
            from: "N", token: "T9", mode: "recvOnly", now: Self.at(1), context: wire.context(call), effects: wire.effects)
        var joined = CallSignal(op: CallSignal.Op.joined)
        joined.members = ["M1"]
        joined.mode = "sendAndRecv"
        #expect(admitted == RoomIntroductions.Admission(friend: "N", reply: joined, mode: "recvOnly"))
        // Replayed after N left: refused with a hang-up.
        #expect(
            m.receiveJoin(from: "N", token: "T9", mode: nil, now: Self.at(2), context: wire.context(call), effects: wire.effects)
                == nil)
        #expect(wire.refused.map(\.id) == ["N"] && wire.refused.map(\.answer) == [true])
        #expect(wire.sent.isEmpty)
    }

    @Test func joinsPastTheirIntroductionOrFromAnotherFriendAreRefused() {
        let wire = Wire()
        var m = RoomIntroductions()
        let call: Set<String> = ["M1"]
        _ = m.receiveIntroduction(
            intro("T9", for: "N"), from: "M1", now: Self.at(0), context: wire.context(call), effects: wire.effects)
        #expect(
            m.receiveJoin(from: "X", token: "T9", mode: nil, now: Self.at(1), context: wire.context(call), effects: wire.effects)
                == nil)
        #expect(
            m.receiveJoin(from: "N", token: "T9", mode: nil, now: Self.at(30), context: wire.context(call), effects: wire.effects)
                == nil)
        #expect(wire.refused.map(\.id) == ["X", "N"] && wire.refused.allSatisfy(\.answer))
        // From someone not in the call, an introduction is refused without an answer.
        _ = m.receiveIntroduction(
            intro("T8", for: "N"), from: "Y", now: Self.at(31), context: wire.context(call), effects: wire.effects)
        #expect(wire.refused.last?.id == "Y" && wire.refused.last?.answer == false)
    }

    @Test func aJoinBeforeItsIntroductionIsHeldThenLetInOrRefusedOnce() {
        let wire = Wire()
        var m = RoomIntroductions()
        let call: Set<String> = ["M1"]
        #expect(
            m.receiveJoin(from: "N", token: "T9", mode: nil, now: Self.at(0), context: wire.context(call), effects: wire.effects)
                == nil)
        #expect(m.holdsJoin(from: "N") && wire.refused.isEmpty)
        let admitted = m.receiveIntroduction(
            intro("T9", for: "N"), from: "M1", now: Self.at(1), context: wire.context(call), effects: wire.effects)
        #expect(admitted?.friend == "N" && !m.holdsJoin(from: "N"))

        #expect(
            m.receiveJoin(from: "O", token: "T7", mode: nil, now: Self.at(1), context: wire.context(call), effects: wire.effects)
                == nil)
        m.tick(now: Self.at(3.9), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        #expect(wire.refused.isEmpty)
        m.tick(now: Self.at(4), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        m.tick(now: Self.at(5), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        #expect(wire.refused.map(\.id) == ["O"] && wire.refused.map(\.answer) == [true])
    }

    @Test func introductionsToMembersAreJoinedOrOwed() {
        let wire = Wire()
        var m = RoomIntroductions()
        wire.unreachable = ["M3"]
        let call: Set<String> = ["M1"]
        m.joinIntroduced(
            ["M2": "T2", "M3": "T3", "STRANGER": "T4", "INVITED": "T5", "ME": "T6", "M1": "T7"], now: Self.at(0),
            context: wire.context(call), effects: wire.effects)
        #expect(wire.lines == ["M2 join T2 - "])
        #expect(m.isJoining("M2") && m.owedJoinMembers == ["M3"])
        wire.unreachable = []
        m.tick(now: Self.at(1), holdLimit: Self.hold, context: wire.context(call), effects: wire.effects)
        #expect(wire.lines == ["M2 join T2 - ", "M3 join T3 - "])
        #expect(!m.owesJoins)
    }

    func intro(_ token: String, for newcomer: String) -> CallSignal {
        var s = CallSignal(op: CallSignal.Op.introduce, inv: token)
        s.text = newcomer
        return s
    }
}
