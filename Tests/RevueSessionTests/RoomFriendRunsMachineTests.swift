import MediaCore
import Testing

@testable import RevueSession

/// The friend-run decisions driven directly, at fixed times: one `hello` per time a friend comes
/// online, a new epoch ending the friend's earlier run, unknown calls answered at most once a
/// second and only for in-call signalling.
@Suite struct RoomFriendRunsMachineTests {
    static func at(_ seconds: Double) -> MonotonicTime { .zero + .seconds(seconds) }

    static func hello(_ epoch: String?) -> CallSignal {
        var s = CallSignal(op: CallSignal.Op.hello)
        s.epoch = epoch
        return s
    }

    @Test func aFriendIsGreetedOnceEachTimeItComesOnline() {
        var runs = RoomFriendRuns()
        runs.begin(epoch: "E1")
        #expect(runs.greeting(for: "F") == Self.hello("E1"))
        // Not sent yet (its stream could not take it): asked again.
        #expect(runs.greeting(for: "F") == Self.hello("E1"))
        runs.greeted("F")
        #expect(runs.greeting(for: "F") == nil)
        runs.wentOffline("F")
        #expect(runs.greeting(for: "F") == Self.hello("E1"))
    }

    @Test func onlyANewEpochEndsAFriendsEarlierRun() {
        var runs = RoomFriendRuns()
        #expect(runs.receiveHello(Self.hello("A"), from: "F") == false)
        #expect(runs.receiveHello(Self.hello("A"), from: "F") == false)
        #expect(runs.receiveHello(Self.hello(nil), from: "F") == false)
        #expect(runs.receiveHello(Self.hello(""), from: "F") == false)
        #expect(runs.receiveHello(Self.hello(String(repeating: "B", count: 33)), from: "F") == false)
        #expect(runs.receiveHello(Self.hello("B"), from: "F") == true)
        #expect(runs.receiveHello(Self.hello("B"), from: "F") == false)
        runs.forget("F")
        #expect(runs.receiveHello(Self.hello("C"), from: "F") == false)
    }

    @Test func unknownCallsAreAnsweredOnlyForInCallSignallingAtMostOnceASecond() {
        var runs = RoomFriendRuns()
        let chat = CallSignal(op: CallSignal.Op.chat)
        #expect(!runs.answersUnknownCall(CallSignal(op: CallSignal.Op.invite, inv: "I"), from: "F", now: Self.at(0)))
        #expect(runs.answersUnknownCall(CallSignal(type: "track", op: CallSignal.Op.publish), from: "F", now: Self.at(0)))
        #expect(runs.answersUnknownCall(chat, from: "F", now: Self.at(0)))
        runs.answeredUnknownCall(of: "F", at: Self.at(0))
        #expect(!runs.answersUnknownCall(chat, from: "F", now: Self.at(0.999)))
        #expect(runs.answersUnknownCall(chat, from: "G", now: Self.at(0.5)))
        #expect(runs.answersUnknownCall(chat, from: "F", now: Self.at(1)))
    }
}
