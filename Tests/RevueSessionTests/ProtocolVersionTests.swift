import Testing
@testable import RevueSession

@Suite struct ProtocolVersionTests {
    @Test func protocolVersionIsOne() { #expect(revueProtocolVersion == 1) }
}
