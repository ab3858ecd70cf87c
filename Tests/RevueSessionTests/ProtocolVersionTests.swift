import Testing

@testable import RevueSession

@Suite struct ProtocolVersionTests {
    /// Version 4: one endpoint encoding (a family byte, 4 or 16 address bytes, the port) in
    /// rendezvous registration and lookup answers, so IPv4 and IPv6 endpoints read alike. Version 3
    /// (tags at rendezvous nodes, no long-term key on the wire outside the Noise handshake) and
    /// older peers and nodes are not understood.
    @Test func protocolVersionIsFour() { #expect(revueProtocolVersion == 4) }
}
