// The WHIP endpoint's HTTP side on a loopback socket, without a peer connection behind it: what
// a client gets for a good offer, for a program that refuses it, and for malformed, oversize or
// misdirected requests (which never reach the program). No clock: runs in the unit phase.
import Foundation
import RevueMedia
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct WHIPServerTests {
    /// Sends `bytes` to 127.0.0.1:`port` on a fresh connection and returns the status code of
    /// the response and the whole response text (its head in lower case).
    static func exchange(_ bytes: [UInt8], port: UInt16) throws -> (Int, String) {
        let response = try LoopbackHTTP.exchange(bytes, port: port)
        return (response.status, response.head + "\r\n\r\n" + response.body)
    }

    static func request(_ method: String, _ target: String, type: String? = "application/sdp", body: String = "") -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\n"
        if let type { head += "Content-Type: \(type)\r\n" }
        head += "Content-Length: \(body.utf8.count)\r\n\r\n"
        return Array((head + body).utf8)
    }

    @Test func offersAreAnsweredAndEveryBadRequestIsRefusedBeforeTheProgram() throws {
        let calls = Mutex<[String]>([])
        let server = try WHIPServer(port: 0) { offer, id in
            calls.withLock { $0.append("offer \(id) \(offer.sdp)") }
            guard offer.sdp.hasPrefix("v=0") else { throw RTCError.invalidDescription("not SDP") }
            return RTCSessionDescription(type: .answer, sdp: "v=0\r\nanswer\r\n")
        } end: { id in
            calls.withLock { $0.append("end \(id)") }
        }
        defer { server.stop() }
        let port = server.port

        // A good offer: 201, the answer, a Location under the path; DELETE ends it once.
        let (status, text) = try Self.exchange(Self.request("POST", "/whip", body: "v=0\r\noffer\r\n"), port: port)
        #expect(status == 201, "\(text)")
        #expect(text.contains("\r\ncontent-type: application/sdp\r\n") && text.hasSuffix("\r\n\r\nv=0\r\nanswer\r\n"))
        let location = try #require(
            text.components(separatedBy: "\r\n").first { $0.hasPrefix("location: ") }.map { String($0.dropFirst(10)) })
        #expect(location.hasPrefix("/whip/") && location.count == "/whip/".count + 16)
        #expect(try Self.exchange(Self.request("DELETE", location, type: nil), port: port).0 == 200)
        #expect(try Self.exchange(Self.request("DELETE", location, type: nil), port: port).0 == 404)

        // The program refuses: 400 with its reason, no session.
        let refused = try Self.exchange(Self.request("POST", "/whip", body: "hello"), port: port)
        #expect(refused.0 == 400 && refused.1.contains("not SDP"))

        let before = calls.withLock { $0.count }
        let cases: [(String, [UInt8], Int)] = [
            ("wrong type", Self.request("POST", "/whip", type: "text/plain", body: "v=0"), 415),
            ("no type", Self.request("POST", "/whip", type: nil, body: "v=0"), 415),
            ("GET", Self.request("GET", "/whip", type: nil), 405),
            ("PATCH (trickle)", Self.request("PATCH", "/whip/0123456789abcdef", type: "application/trickle-ice-sdpfrag"), 405),
            ("other path", Self.request("POST", "/other", body: "v=0"), 404),
            ("unknown session", Self.request("DELETE", "/whip/nope", type: nil), 404),
            ("not HTTP", Array("hello there\r\n\r\n".utf8), 400),
            ("body too large", Self.request("POST", "/whip", body: String(repeating: "a", count: 70_000)), 413),
            (
                "too many fields",
                Array(
                    ("POST /whip HTTP/1.1\r\n" + (0..<40).map { "X-\($0): y\r\n" }.joined() + "Content-Length: 0\r\n\r\n").utf8),
                431
            ),
            ("head too large", Array("POST /whip HTTP/1.1\r\nX: \(String(repeating: "b", count: 9000))\r\n\r\n".utf8), 431),
        ]
        for (name, bytes, expected) in cases {
            let (got, text) = try Self.exchange(bytes, port: port)
            #expect(got == expected, "\(name): \(got) \(text.prefix(200))")
        }
        #expect(calls.withLock { $0.count } == before, "a refused request reached the program")
        #expect(calls.withLock { $0.filter { $0.hasPrefix("end ") }.count } == 1)
    }

    @Test func aHostThatIsNotIPv4OrAPortInUseIsATypedError() throws {
        do {
            _ = try WHIPServer(host: "localhost") { _, _ in RTCSessionDescription(type: .answer, sdp: "") }
            Issue.record("a host name was accepted")
        } catch {
            guard case .invalidConfiguration = error else { throw error }
        }
        let first = try WHIPServer(port: 0) { _, _ in RTCSessionDescription(type: .answer, sdp: "") }
        defer { first.stop() }
        do {
            let second = try WHIPServer(port: first.port) { _, _ in RTCSessionDescription(type: .answer, sdp: "") }
            second.stop()
            Issue.record("a second server bound port \(first.port)")
        } catch {
            guard case .setup = error else { throw error }
        }
    }
}
