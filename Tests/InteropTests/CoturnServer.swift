import Foundation
import MediaCore
import Testing

// A real coturn `turnserver` for the STUN and TURN tests, started from a generated configuration
// on a free port and stopped at the end of the test.
#if canImport(Glibc)
    import Glibc
#endif

/// A coturn `turnserver` for one test: listens on `ip`:`port` over UDP and TCP (127.0.0.1 by
/// default, ::1, or an address inside the network namespace `namespace`), relays UDP from `ip`
/// (and from each of `relayIPs` when given: coturn then serves both families), one long-term
/// user. With `tls` (a certificate and key file), it also listens for TLS over TCP on `tlsPort`.
/// With `verbose`, coturn logs every message (read it from `stop()`'s stdout);
/// `extraConfiguration` lines are appended to the configuration (e.g. `max-allocate-lifetime=4`).
/// `restart()` kills it and starts it again on the same ports; stopped with `stop()`.
final class CoturnServer {
    static let realm = "revue.test", user = "alice", password = "wonderland"
    let ip: String
    let port: Int
    /// The TLS listening port (0 without `tls`).
    let tlsPort: Int
    private(set) var process: ToolProcess
    let dir = InteropTempDir()
    private let command: [String]

    init(
        ip: String = "127.0.0.1", namespace: String? = nil, verbose: Bool = false, relayIPs: [String]? = nil,
        tls: (certificate: String, key: String)? = nil, extraConfiguration: [String] = []
    ) throws {
        self.ip = ip
        port = cliFreePort()
        let tlsPort = tls == nil ? 0 : cliFreePort()
        self.tlsPort = tlsPort
        let relayBase = cliFreePort()
        let relays = (relayIPs ?? [ip]).map { "relay-ip=\($0)" }.joined(separator: "\n")
        let tlsLines =
            tls.map { "tls-listening-port=\(tlsPort)\ncert=\($0.certificate)\npkey=\($0.key)\nno-dtls" } ?? "no-tls\nno-dtls"
        // `no-tcp-relay` refuses TCP relays (RFC 6062); clients may still reach the server over TCP.
        let config = """
            listening-ip=\(ip)
            listening-port=\(port)
            \(relays)
            min-port=\(relayBase)
            max-port=\(relayBase + 3)
            realm=\(Self.realm)
            lt-cred-mech
            user=\(Self.user):\(Self.password)
            fingerprint
            allow-loopback-peers
            \(tlsLines)
            no-cli
            no-tcp-relay
            log-file=stdout
            simple-log
            pidfile=\(dir.file("turnserver.pid"))
            userdb=\(dir.file("turndb"))
            """ + (verbose ? "\nverbose\n" : "\n") + extraConfiguration.map { $0 + "\n" }.joined()
        dir.write("turnserver.conf", Array(config.utf8))
        // The test process blocks most signals in the thread that spawns children, and a child
        // inherits that mask through exec: coturn would never see SIGTERM, and every stop would
        // wait 5 s for the SIGKILL. The same one-line wrapper as Janus's clears the mask first.
        command =
            (namespace.map { ["/usr/bin/ip", "netns", "exec", $0, "turnserver"] } ?? ["/usr/bin/turnserver"])
            + ["-c", dir.file("turnserver.conf")]
        process = try ToolProcess("/usr/bin/python3", ["-c", unblockSignalsAndExec] + command, cwd: dir.path)
    }

    var address: SocketAddress { try! SocketAddress(parsing: ip, defaultPort: UInt16(port)) }
    /// The TLS listening address (with `tls`).
    var tlsAddress: SocketAddress { try! SocketAddress(parsing: ip, defaultPort: UInt16(tlsPort)) }

    /// Kills coturn (SIGKILL: its allocations die with it, nothing is said to clients) and starts it
    /// again from the same configuration on the same ports, without waiting for it. Its output so
    /// far is returned.
    @discardableResult
    func restart() throws -> ToolRun {
        process.signal(SIGKILL)
        let run = process.wait(timeout: 5)
        process = try ToolProcess("/usr/bin/python3", ["-c", unblockSignalsAndExec] + command, cwd: dir.path)
        return run
    }

    /// Waits until coturn answers a Binding request over UDP and accepts a TCP connection; throws
    /// with coturn's output when it does not within `seconds`.
    func waitUntilReady(seconds: Double = 20) throws {
        let probe = try UDPSocket(bindingTo: address.family == .ipv6 ? .loopbackIPv6(port: 0) : .loopbackIPv4(port: 0))
        let binding = STUNMessage(method: .binding, class: .request).encode(fingerprint: true)
        guard try stunTransaction(probe, binding, to: address, seconds: seconds) != nil, tcpAccepts() else {
            let run = stop()
            throw CoturnNotReady(
                detail: "coturn on \(ip):\(port) did not come up: \(run.stdout.suffix(2000)) \(run.stderr.suffix(2000))")
        }
    }

    /// True when a TCP connection to the listening port succeeds.
    private func tcpAccepts() -> Bool {
        let target = address
        for _ in 0..<40 {
            let fd = socket(target.family == .ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let rc = target.withSockaddr { connect(fd, $0, $1) }
            close(fd)
            if rc == 0 { return true }
            usleep(100_000)
        }
        return false
    }

    private var finished: ToolRun?

    /// Stops coturn (SIGTERM, then SIGKILL after 5 s) and returns its output. Idempotent.
    @discardableResult
    func stop() -> ToolRun {
        if let finished { return finished }
        process.signal(SIGTERM)
        let run = process.wait(timeout: 5)
        dir.remove()
        finished = run
        return run
    }
}

/// coturn did not start or answer.
struct CoturnNotReady: Error, CustomStringConvertible {
    var detail: String
    var description: String { detail }
}
