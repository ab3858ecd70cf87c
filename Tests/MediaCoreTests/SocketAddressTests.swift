import MediaCore
import Testing

@Suite struct SocketAddressTests {
    @Test func parsesAndPrintsIPv4WithPort() throws {
        let a = try SocketAddress(parsing: "192.168.1.20:5004")
        #expect(a.family == .ipv4)
        #expect(a.port == 5004)
        #expect(a.addressBytes == [192, 168, 1, 20])
        #expect(a.description == "192.168.1.20:5004")
    }

    @Test func parsesBracketedIPv6() throws {
        let a = try SocketAddress(parsing: "[2001:db8::7]:443")
        #expect(a.family == .ipv6)
        #expect(a.port == 443)
        #expect(a.addressBytes == [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7])
        #expect(a.description == "[2001:db8::7]:443")
        #expect(try SocketAddress(parsing: "[::1]:9") == .loopbackIPv6(port: 9))
    }

    @Test func resolvesLocalhostToIPv4Loopback() throws {
        #expect(try SocketAddress(parsing: "localhost:6000") == .loopbackIPv4(port: 6000))
    }

    @Test func usesDefaultPortOnlyWhenGiven() throws {
        #expect(try SocketAddress(parsing: "10.0.0.1", defaultPort: 7) == SocketAddress(ipv4: 10, 0, 0, 1, port: 7))
        #expect(try SocketAddress(parsing: "::1", defaultPort: 7) == .loopbackIPv6(port: 7))
        #expect(throws: SocketAddressParseError.self) { try SocketAddress(parsing: "10.0.0.1") }
    }

    @Test func rejectsBadInputNamingIt() {
        for bad in ["1.2.3.4:70000", "1.2.3.4:x", "[::1", "[::1]x", ":5000", "[fe80::1%no-such-if9]:5"] {
            do {
                _ = try SocketAddress(parsing: bad)
                Issue.record("'\(bad)' parsed")
            } catch {
                #expect(error.input == bad)
                #expect(error.description.contains(bad))
            }
        }
    }

    @Test func roundTripsThroughKernelSockaddr() throws {
        for text in ["127.0.0.1:1", "255.255.255.255:65535", "[fe80::1%1]:80", "[::]:0"] {
            let a = try SocketAddress(parsing: text)
            let b = a.withSockaddr { sa, _ in SocketAddress(sockaddr: sa) }
            #expect(b == a)
        }
    }
}
