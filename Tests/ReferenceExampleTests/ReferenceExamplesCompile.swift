// The reference's Swift examples (../shared/reference) are copied unchanged into this target, one
// file per reference page, so a rename in the API breaks the build here first. The tests below run
// the friends examples against real instances where that needs no network.
import Testing
import Foundation
import RevueSDK

@Suite struct ReferenceExamplesCompile {
    @Test func sdkModuleLoads() { #expect(revueProtocolVersion >= 1) }

    @MainActor
    @Test func profileExamplesEchoOwnNameWithOwnIdentity() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-ref-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = RevueConfiguration(dataDirectory: dir)
        config.bindHost = "127.0.0.1"
        try Revue.shared.initialize(config)
        defer { Revue.shared.destroy() }
        let observer = ProfileObserver()
        var ownNames: [String] = []
        var statuses: [(String, UserStatus)] = []
        observer.onOwnName = { ownNames.append($0) }
        observer.onStatus = { statuses.append(($0, $1)) }
        Revue.shared.delegates.add(delegate: observer)
        updateMyProfile()
        let deadline = Date().addingTimeInterval(3)
        while (ownNames.isEmpty || statuses.isEmpty) && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(ownNames == ["Alice"])
        #expect(statuses.count == 1 && statuses.first?.0 == Revue.shared.revueId && statuses.first?.1 == .busy)
        #expect(loadFriendRows().isEmpty)
        #expect(removeFriend(String(repeating: "A", count: 64)))
        let sent = await sendChat("hi", to: String(repeating: "B", count: 64))
        #expect(!sent)
    }
}
