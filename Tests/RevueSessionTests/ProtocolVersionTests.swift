import Testing

@testable import RevueSession

@Suite struct ProtocolVersionTests {
    /// Version 3: rendezvous registrations under per-node registration keys with sealed tags,
    /// lookups and relaying by tag, LAN announcements of tags (no long-term key on the wire
    /// outside the Noise handshake). Version 2 (handshake MACs and cookie replies, rendezvous
    /// cookies, relay tokens, authenticated lookups) and older peers and nodes are not understood.
    @Test func protocolVersionIsThree() { #expect(revueProtocolVersion == 3) }
}
