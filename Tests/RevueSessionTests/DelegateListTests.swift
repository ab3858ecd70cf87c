import Testing

@testable import RevueSession

@MainActor
@Suite struct DelegateListTests {
    final class D: RevueDelegate {}

    @Test func holdsDelegatesWeaklyOnceEachInOrder() {
        let list = DelegateList<any RevueDelegate>()
        let a = D()
        var b: D? = D()
        list.add(delegate: a)
        list.add(delegate: b!)
        list.add(delegate: a)
        #expect(list.count == 2)
        #expect(list.all.first === a)
        b = nil
        #expect(list.count == 1, "a released delegate is gone")
        list.remove(delegate: a)
        #expect(list.count == 0)
        list.add(delegate: a)
        list.removeAll()
        #expect(list.all.isEmpty)
    }
}
