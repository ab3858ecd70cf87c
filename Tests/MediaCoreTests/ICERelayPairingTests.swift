import MediaCore
import Testing

/// Which remote candidates a relayed candidate pairs with: a relay on a global address never
/// checks a peer's private, shared, link-local or loopback address (the server cannot reach it,
/// and coturn closes the allocation whose send to it fails), while every other pairing stays.
@Suite struct ICERelayPairingTests {
    func candidate(_ type: ICECandidateType, _ address: String) throws -> ICECandidate {
        ICECandidate(foundation: "1", priority: 1, address: try SocketAddress(parsing: address, defaultPort: 0), type: type)
    }

    func local(_ type: ICECandidateType, _ address: String) throws -> ICELocalCandidate {
        let c = try candidate(type, address)
        return ICELocalCandidate(candidate: c, base: c.address, relay: type == .relay ? 0 : nil)
    }

    @Test func nonGlobalAddressesAreRecognised() throws {
        let nonGlobal = [
            "10.1.2.3:1", "172.16.0.1:1", "172.31.255.1:1", "192.168.1.2:1", "100.64.0.1:1", "100.127.0.1:1",
            "169.254.1.1:1", "127.0.0.1:1", "0.1.2.3:1", "[::1]:1", "[fe80::1]:1", "[fd00::1]:1", "[fc12::1]:1",
            "[::ffff:10.0.0.1]:1", "[::]:1",
        ]
        let global = [
            "203.0.113.1:1", "8.8.8.8:1", "172.32.0.1:1", "100.128.0.1:1", "192.169.0.1:1", "[2001:db8::1]:1",
            "[::ffff:203.0.113.9]:1",
        ]
        for a in nonGlobal { #expect(ICEHostAddresses.isNonGlobal(try SocketAddress(parsing: a, defaultPort: 0)), "\(a)") }
        for a in global { #expect(!ICEHostAddresses.isNonGlobal(try SocketAddress(parsing: a, defaultPort: 0)), "\(a)") }
    }

    @Test func aPublicRelaySkipsThePeersPrivateAddresses() throws {
        let relay = try local(.relay, "203.0.113.1:49160")
        #expect(!ICEAgent.relayCanReach(relay, try candidate(.host, "10.0.2.2:5000")))
        #expect(!ICEAgent.relayCanReach(relay, try candidate(.host, "[fd00::2]:5000")))
        #expect(ICEAgent.relayCanReach(relay, try candidate(.srflx, "198.51.100.2:5000")))
        #expect(ICEAgent.relayCanReach(relay, try candidate(.relay, "203.0.113.1:49161")))
        #expect(ICEAgent.relayCanReach(relay, try candidate(.host, "[2001:db8:2::2]:5000")))
        // Learned through the relay: the server did reach it.
        #expect(ICEAgent.relayCanReach(relay, try candidate(.prflx, "10.0.2.2:5000")))
    }

    @Test func otherPairingsStay() throws {
        // A relay inside a private network reaches that network's addresses.
        #expect(ICEAgent.relayCanReach(try local(.relay, "10.0.0.5:49160"), try candidate(.host, "10.0.2.2:5000")))
        // Host candidates pair with everything.
        #expect(ICEAgent.relayCanReach(try local(.host, "10.0.1.2:4000"), try candidate(.host, "10.0.2.2:5000")))
        #expect(ICEAgent.relayCanReach(try local(.host, "192.0.2.9:4000"), try candidate(.host, "192.168.0.2:5000")))
    }
}
