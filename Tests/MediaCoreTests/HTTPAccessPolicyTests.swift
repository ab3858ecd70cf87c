// HTTPAccessPolicy's decisions on hostile field values, without a socket: Host values that try
// to pass for an allowed name, Authorization values that are almost the token, Origins that look
// like allowed ones, and the constant-time comparison on every length.
import MediaCore
import Testing

struct HTTPAccessPolicyTests {
    static let policy = HTTPAccessPolicy(
        boundHost: "127.0.0.1", port: 8080, hosts: nil, tokens: ["abc123", "second"], origins: ["https://App.Example.com/"])

    @Test func hostValuesMustNameAnAllowedHostAndPort() {
        let p = Self.policy
        for good in ["127.0.0.1", "127.0.0.1:8080", "localhost", "LocalHost:8080", "[::1]", "[::1]:8080"] {
            #expect(p.hostAllowed(good), "\(good)")
        }
        for bad in [
            nil, "", "127.0.0.1:8081", "127.0.0.1:", "127.0.0.1:8080:80", "localhost.evil.example", "evil.example",
            "[::1", "[::1]x", "[::2]:8080", "::1", "127.0.0.2", "localhost:80800", " localhost", "localhost@evil",
        ] as [String?] {
            #expect(!p.hostAllowed(bad), "\(bad ?? "nil")")
        }
        let proxied = HTTPAccessPolicy(boundHost: "0.0.0.0", port: 9000, hosts: ["media.example.org:8443", "[2001:db8::1]"])
        #expect(proxied.hostAllowed("media.example.org:8443") && proxied.hostAllowed("MEDIA.example.org:8443"))
        #expect(!proxied.hostAllowed("media.example.org:9443") && !proxied.hostAllowed("media.example.org"))
        #expect(proxied.hostAllowed("[2001:db8::1]:9000") && !proxied.hostAllowed("0.0.0.0:9000"))
        #expect(HTTPAccessPolicy.defaultHosts(bound: "0.0.0.0") == ["localhost", "127.0.0.1", "[::1]"])
        #expect(HTTPAccessPolicy.defaultHosts(bound: "192.0.2.7").last == "192.0.2.7")
    }

    @Test func onlyAnExactBearerTokenAuthorizes() {
        let p = Self.policy
        #expect(p.authorized("Bearer abc123") && p.authorized("bearer second") && p.authorized("BEARER  abc123"))
        for bad in [
            nil, "", "Bearer", "Bearer ", "abc123", "Basic abc123", "Bearer abc12", "Bearer abc1234", "Bearer ABC123",
            "Bearer abc123 ", "Bearer \0abc123", "Bearer secondabc123",
        ] as [String?] {
            #expect(!p.authorized(bad), "\(bad ?? "nil")")
        }
        #expect(HTTPAccessPolicy(boundHost: "127.0.0.1", port: 1).authorized(nil), "no tokens: no token asked for")
        let lengths = [0, 1, 5, 6, 7, 64]
        for a in lengths {
            for b in lengths {
                let x = [UInt8](repeating: 7, count: a), y = [UInt8](repeating: 7, count: b)
                #expect(HTTPAccessPolicy.constantTimeEqual(x, y) == (a == b))
            }
        }
        #expect(!HTTPAccessPolicy.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        // Lengths that differ by a multiple of 256 are still different.
        #expect(!HTTPAccessPolicy.constantTimeEqual([UInt8](repeating: 0, count: 256), []))
    }

    @Test func originsAreAllowedExactlyOrBySameServer() {
        let p = Self.policy
        #expect(p.origin(nil) == .none && p.origin("") == .none)
        #expect(p.origin("https://app.example.com") == .allowed("https://app.example.com"))
        #expect(p.origin("http://127.0.0.1:8080") == .allowed("http://127.0.0.1:8080"), "the server's own page")
        for foreign in [
            "https://app.example.com.evil.example", "http://app.example.com", "https://app.example.com:444", "null",
            "http://127.0.0.1:9999", "https://127.0.0.1:8080", "http://evil.example",
        ] {
            #expect(p.origin(foreign) == .foreign, "\(foreign)")
        }
    }
}
