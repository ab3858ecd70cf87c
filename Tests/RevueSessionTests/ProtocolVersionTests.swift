import Testing

@testable import RevueSession

@Suite struct ProtocolVersionTests {
    /// Version 5: a rendezvous node seals its answer to a registration that opened under its key
    /// (acceptance, cookie, relay token, under the registration's MAC key with the timestamp as
    /// nonce) and sends only the node key and a cookie unsealed, so the two forms of `registered`
    /// differ from version 4's single 67-byte one. Version 4 (one endpoint encoding, a family byte,
    /// 4 or 16 address bytes and the port, in registration and lookup answers) and older peers and
    /// nodes are not understood.
    @Test func protocolVersionIsFive() { #expect(revueProtocolVersion == 5) }
}
