// A real Janus WebRTC server (the Debian `janus` package) for the SFU tests, started from a
// configuration generated into a temporary directory and stopped at the end of the test.
import Foundation
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A Janus server for one test: only the HTTP transport (on 127.0.0.1, or `Options.host`, at a free port; with
/// `Options`, also HTTPS, the WebSocket transport's ws and wss, an `api_secret`, stored-token
/// authentication with the admin API on its own port) and the VideoRoom plugin are loaded, no STUN or TURN, IPv4 only, half trickle (every
/// candidate in Janus's SDP), no event handlers or loggers. The log goes to `janus.log` in the
/// temporary directory (`logTail`). Stopped with `stop()` (SIGTERM, then SIGKILL).
///
/// ICE: Janus gathers through libnice, which leaves out loopback interfaces whatever
/// `ice_enforce_list` says, so Janus's host candidates are the machine's other interface
/// addresses (IPv4 with `ice_ignore_list` dropping nothing else); packets between two local
/// addresses never leave the machine. The Revue peers therefore bind to every IPv4 interface and
/// offer the non-loopback addresses, as they would toward a remote server.
package final class JanusServer {
    package static let folder = "/usr/lib/x86_64-linux-gnu/janus"
    package let port: Int
    package let dir = InteropTempDir()
    package let process: ToolProcess
    package let options: Options
    /// The HTTPS port (with a certificate), the WebSocket ports (ws; wss with a certificate) and
    /// the admin API's plain HTTP port (with token authentication); 0 when off.
    package let httpsPort: Int, wsPort: Int, wssPort: Int, adminPort: Int
    /// The admin API's secret (token authentication only).
    package let adminSecret = "revue-admin-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)

    /// What the server offers beyond plain HTTP on 127.0.0.1: TLS, WebSockets and authentication.
    package struct Options {
        /// A PEM certificate and key: HTTPS (and wss with `webSocket`) on 127.0.0.1.
        package var certificate: (pem: String, key: String)?
        /// The WebSocket transport: ws on 127.0.0.1 (and wss with a certificate).
        package var webSocket = false
        /// `general.api_secret`.
        package var apiSecret: String?
        /// `general.token_auth` with tokens added through the admin API (`addToken`).
        package var tokenAuth = false
        /// The IPv4 address every transport listens on (and `address` names).
        package var host = "127.0.0.1"
        /// A network namespace to run Janus in (`ip netns exec`); nil: the test's own.
        package var namespace: String?
        /// `general.session_timeout`: a session that hears nothing for this long ends (seconds).
        package var sessionTimeout = 60
        /// `general.reclaim_session_timeout`: how long a session whose WebSocket connection ended
        /// can still be claimed on a new one (seconds; 0: it ends with its connection).
        package var reclaimSessionTimeout = 0

        /// Plain HTTP only, no authentication.
        package init() {}
    }

    /// Starts Janus with its HTTP transport on `port` (nil: a free one).
    package convenience init(port: Int? = nil) throws { try self.init(port: port, options: Options()) }

    /// Starts Janus with its HTTP transport on `port` (nil: a free one) and what `options` adds.
    package init(port: Int? = nil, options: Options) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/janus") else {
            throw ToolMissing(tool: "janus (Debian package janus; scripts/install-deps)")
        }
        self.options = options
        // Five ports chosen at random from 6,000 meet now and then: each avoids those before it
        // (two listeners on one port made Janus exit in a CI run).
        var chosen: [Int] = []
        func free(_ wanted: Bool) -> Int {
            guard wanted else { return 0 }
            let p = cliFreePort(avoiding: chosen)
            chosen.append(p)
            return p
        }
        if let port { chosen.append(port) }
        self.port = port ?? free(true)
        let port = self.port
        httpsPort = free(options.certificate != nil)
        wsPort = free(options.webSocket)
        wssPort = free(options.webSocket && options.certificate != nil)
        adminPort = free(options.tokenAuth)
        let plugins = ((try? FileManager.default.contentsOfDirectory(atPath: Self.folder + "/plugins")) ?? [])
            .filter { $0.hasSuffix(".so") && $0 != "libjanus_videoroom.so" }
        let wanted: Set<String> = options.webSocket ? ["libjanus_http.so", "libjanus_websockets.so"] : ["libjanus_http.so"]
        let transports = ((try? FileManager.default.contentsOfDirectory(atPath: Self.folder + "/transports")) ?? [])
            .filter { $0.hasSuffix(".so") && !wanted.contains($0) }
        var authentication = ""
        if let secret = options.apiSecret { authentication += "    api_secret = \"\(secret)\"\n" }
        if options.tokenAuth { authentication += "    token_auth = true\n    admin_secret = \"\(adminSecret)\"\n" }
        let certificates =
            options.certificate.map {
                """
                certificates: {
                    cert_pem = "\($0.pem)"
                    cert_key = "\($0.key)"
                }

                """
            } ?? ""
        let loggers = ((try? FileManager.default.contentsOfDirectory(atPath: Self.folder + "/loggers")) ?? [])
            .filter { $0.hasSuffix(".so") }
        let core = """
            general: {
                configs_folder = "\(dir.path)"
                plugins_folder = "\(Self.folder)/plugins"
                transports_folder = "\(Self.folder)/transports"
                events_folder = "\(Self.folder)/events"
                loggers_folder = "\(Self.folder)/loggers"
                debug_level = 4
                debug_timestamps = true
                session_timeout = \(options.sessionTimeout)
                reclaim_session_timeout = \(options.reclaimSessionTimeout)
                server_name = "revue-test"
            \(authentication)}
            media: {
                ipv6 = false
                rtp_port_range = "\(port + 10)-\(port + 400)"
                dtls_timeout = 500
            }
            nat: {
                nice_debug = false
                full_trickle = false
                ice_lite = false
                ice_tcp = false
                ice_ignore_list = "vmnet,docker,veth"
            }
            plugins: {
                disable = "\(plugins.joined(separator: ","))"
            }
            transports: {
                disable = "\(transports.joined(separator: ","))"
            }
            loggers: {
                disable = "\(loggers.joined(separator: ","))"
            }
            events: {
                broadcast = false
            }

            """
        let http = """
            general: {
                json = "plain"
                base_path = "/janus"
                http = true
                port = \(port)
                ip = "\(options.host)"
                https = \(httpsPort != 0)
                secure_port = \(httpsPort == 0 ? 8089 : httpsPort)
                secure_ip = "\(options.host)"
            }
            admin: {
                admin_base_path = "/admin"
                admin_http = \(adminPort != 0)
                admin_port = \(adminPort == 0 ? 7088 : adminPort)
                admin_ip = "\(options.host)"
                admin_https = false
            }
            \(certificates)
            """
        let websockets = """
            general: {
                json = "plain"
                ws = \(wsPort != 0)
                ws_port = \(wsPort == 0 ? 8188 : wsPort)
                ws_ip = "\(options.host)"
                wss = \(wssPort != 0)
                wss_port = \(wssPort == 0 ? 8989 : wssPort)
                wss_ip = "\(options.host)"
                ws_logging = "err,warn"
            }
            admin: {
                admin_ws = false
                admin_wss = false
            }
            \(certificates)
            """
        let videoroom = """
            general: {
                string_ids = false
            }

            """
        dir.write("janus.jcfg", Array(core.utf8))
        dir.write("janus.transport.http.jcfg", Array(http.utf8))
        if options.webSocket { dir.write("janus.transport.websockets.jcfg", Array(websockets.utf8)) }
        dir.write("janus.plugin.videoroom.jcfg", Array(videoroom.utf8))
        // The test process blocks most signals in the thread that spawns children, and a child
        // inherits that mask through exec: Janus would never see SIGTERM. A one-line Python
        // wrapper clears the mask and execs Janus (same pid).
        let inNamespace = options.namespace.map { ["/usr/sbin/ip", "netns", "exec", $0] } ?? []
        process = try ToolProcess(
            "/usr/bin/python3",
            ["-c", unblockSignalsAndExec] + inNamespace + [
                "/usr/bin/janus", "-C", dir.file("janus.jcfg"), "-F", dir.path, "-L", dir.file("janus.log"), "-o",
            ],
            cwd: dir.path)
    }

    /// Starts Janus and waits until it answers (`waitUntilReady`); throws `JanusNotReady` with
    /// the reason and the log tail when it does not (the server is stopped then).
    /// A port another process took after `cliFreePort` chose it (Janus says it "Couldn't start"
    /// a webserver, the admin one included) is tried again with new ones (at most three times).
    package static func started(seconds: Double = 15, options: Options = Options()) async throws -> JanusServer {
        for attempt in 1...3 {
            let janus = try JanusServer(options: options)
            do {
                try await janus.waitUntilReady(seconds: seconds)
                return janus
            } catch let e as JanusNotReady where attempt < 3 && e.detail.contains("Couldn't start") {
                continue
            }
        }
        preconditionFailure("unreachable: the third attempt returns or throws")
    }

    /// The HTTP transport's address.
    package var address: SocketAddress {
        (try? SocketAddress(host: options.host, port: UInt16(port))) ?? .loopbackIPv4(port: UInt16(port))
    }

    /// The last `bytes` of Janus's log.
    package func logTail(_ bytes: Int = 3000) -> String { String(decoding: dir.read("janus.log").suffix(bytes), as: UTF8.self) }

    /// Waits until `GET /janus/info` answers with the VideoRoom plugin loaded; throws with the
    /// reason and the log tail when it does not within `seconds` (or Janus exits).
    package func waitUntilReady(seconds: Double = 15) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        var last = "no answer yet"
        while Date() < deadline {
            if !process.process.isRunning {
                let log = logTail(1500)
                let run = stop()
                throw JanusNotReady(
                    detail:
                        "janus exited with status \(run.status) before answering; output: \(run.stdout.suffix(1500)) \(run.stderr.suffix(500)) log: \(log)"
                )
            }
            do {
                var endpoint = JanusEndpoint(server: address)
                endpoint.apiSecret = options.apiSecret
                let info = try await JanusSession.info(endpoint: endpoint, timeoutSeconds: 1)
                if info["plugins"]?[JanusVideoRoom.plugin] != nil, try await otherTransportsAnswer() { return }
                last = "info without the VideoRoom plugin, or a transport that does not answer yet"
            } catch {
                last = "\(error)"
            }
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
        let tail = logTail()
        stop()
        throw JanusNotReady(
            detail: "janus on \(options.host):\(port) did not answer /janus/info within \(seconds) s (\(last)); log: \(tail)")
    }

    /// Whether the TLS, WebSocket and admin ports take connections.
    private func otherTransportsAnswer() async throws -> Bool {
        for port in [httpsPort, wsPort, wssPort, adminPort] where port != 0 {
            guard
                (try? ClientStream.connect(host: options.host, port: UInt16(port), tls: nil, deadline: .now + .seconds(1)))
                    != nil
            else { return false }
        }
        return true
    }

    /// Adds `token` to the tokens Janus accepts (the admin API's `add_token`; token
    /// authentication only). Throws the admin API's error.
    nonisolated(nonsending) package func addToken(_ token: String) async throws {
        let client = JanusHTTPClient(server: .loopbackIPv4(port: UInt16(adminPort)))
        let body: JSONValue = [
            "janus": "add_token", "token": .string(token), "transaction": "add-token", "admin_secret": .string(adminSecret),
        ]
        let response = try await client.send(method: "POST", path: "/admin", body: body.bytes, timeoutSeconds: 5)
        let json = try JSONValue.parse(response.body)
        guard response.status == 200, json["janus"]?.string == "success" else {
            throw JanusNotReady(detail: "add_token answered \(response.status) \(String(decoding: response.body, as: UTF8.self))")
        }
    }

    private var finished: ToolRun?

    /// Stops Janus (SIGTERM, then SIGKILL after 5 s), removes the directory and returns its
    /// output. Idempotent.
    @discardableResult
    package func stop() -> ToolRun {
        if let finished { return finished }
        let started = Date()
        process.signal(SIGTERM)
        let run = process.wait(timeout: 5)
        if run.timedOut { print("JanusServer: killed after SIGTERM; log: \(logTail(1200))") }
        // A status other than 0 after SIGTERM: it had died before (a crash): its last words.
        if !run.timedOut && run.status != 0 {
            print("JanusServer: it had exited on its own; output: \(run.stderr.suffix(1500)) log: \(logTail(3000))")
        }
        print(
            "JanusServer: stopped in \(String(format: "%.2f", Date().timeIntervalSince(started))) s (status \(run.status)\(run.timedOut ? ", killed" : ""))"
        )
        dir.remove()
        finished = run
        return run
    }
}

/// Janus did not start or answer.
package struct JanusNotReady: Error, CustomStringConvertible {
    package var detail: String
    /// The error with `detail`.
    package init(detail: String) { self.detail = detail }
    package var description: String { detail }
}
