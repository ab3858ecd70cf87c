import Testing
@testable import RevueSession

@Suite struct ProtocolVersionTests {
    /// Version 2: handshake MACs and cookie replies, rendezvous cookies, relay tokens and
    /// authenticated lookups. Version 1 peers and nodes are not understood (and do not understand us).
    @Test func protocolVersionIsTwo() { #expect(revueProtocolVersion == 2) }
}
