import Testing

@testable import RevueSession

@Suite struct ReplayWindowTests {
    @Test func acceptsEachCounterOnceInAnyOrderWithinWindow() {
        var w = ReplayWindow()
        for c: UInt64 in [5, 3, 9, 4, 0, 1, 2, 8, 7, 6] {
            #expect(w.wouldAccept(c))
            w.record(c)
            #expect(!w.wouldAccept(c))
        }
        for c: UInt64 in 0...9 { #expect(!w.wouldAccept(c)) }
        #expect(w.wouldAccept(10))
    }

    @Test func rejectsCountersOlderThanWindow() {
        var w = ReplayWindow()
        w.record(10_000)
        #expect(!w.wouldAccept(10_000 - ReplayWindow.size))
        #expect(w.wouldAccept(10_000 - ReplayWindow.size + 1))
    }

    @Test func slotsAreReusedAfterWindowMoves() {
        var w = ReplayWindow()
        w.record(1)
        w.record(1 + ReplayWindow.size)  // same slot as 1
        #expect(!w.wouldAccept(1))
        #expect(!w.wouldAccept(1 + ReplayWindow.size))
        #expect(w.wouldAccept(2 + ReplayWindow.size))
        // Every position across a wrap-around.
        for c in (2 + ReplayWindow.size)...(3 * ReplayWindow.size) {
            #expect(w.wouldAccept(c))
            w.record(c)
        }
        #expect(!w.wouldAccept(3 * ReplayWindow.size))
        #expect(!w.wouldAccept(2 * ReplayWindow.size))
        #expect(w.wouldAccept(2 * ReplayWindow.size + 1) == false)
    }
}
