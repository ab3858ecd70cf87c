import Foundation
import RevueSDK
import Testing

/// The README's NAT paragraph, as an app writes it with `import RevueSDK` alone.
struct ICEConfigurationTests {
    @Test func readmeTURNConfigurationCompilesAndReadsBack() throws {
        var configuration = RevueConfiguration(dataDirectory: NSTemporaryDirectory() + "revue-ice-config")
        configuration.rendezvousNodes = ["rendezvous.example.net:33400"]
        configuration.iceServers = [.turn("turn.example.net:3478", username: "me", password: "secret", transport: .tcp)]
        let server = try #require(configuration.iceServers.first)
        #expect(server.kind == .turn && server.transport == .tcp && server.username == "me")
        // The command-line form parses to the same server, and a malformed one names the problem.
        #expect(try RevueICEServer(parsing: "me:secret@turn.example.net:3478?transport=tcp") == server)
        #expect(throws: RevueError.self) { try RevueICEServer(parsing: "me@turn.example.net") }
    }
}
