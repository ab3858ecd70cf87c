// A real Janus WebRTC server (the Debian `janus` package) for the SFU tests, started from a
// configuration generated into a temporary directory and stopped at the end of the test.
import Foundation
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A Janus server for one test: only the HTTP transport (on 127.0.0.1 at a free port, no admin
/// API) and the VideoRoom plugin are loaded, no STUN or TURN, IPv4 only, half trickle (every
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

    /// Starts Janus with its HTTP transport on `port` (nil: a free one).
    package init(port: Int? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/janus") else {
            throw ToolMissing(tool: "janus (Debian package janus; scripts/install-deps)")
        }
        self.port = port ?? cliFreePort()
        let port = self.port
        let plugins = ((try? FileManager.default.contentsOfDirectory(atPath: Self.folder + "/plugins")) ?? [])
            .filter { $0.hasSuffix(".so") && $0 != "libjanus_videoroom.so" }
        let transports = ((try? FileManager.default.contentsOfDirectory(atPath: Self.folder + "/transports")) ?? [])
            .filter { $0.hasSuffix(".so") && $0 != "libjanus_http.so" }
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
                session_timeout = 60
                server_name = "revue-test"
            }
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
                ip = "127.0.0.1"
                https = false
            }
            admin: {
                admin_http = false
                admin_https = false
            }

            """
        let videoroom = """
            general: {
                string_ids = false
            }

            """
        dir.write("janus.jcfg", Array(core.utf8))
        dir.write("janus.transport.http.jcfg", Array(http.utf8))
        dir.write("janus.plugin.videoroom.jcfg", Array(videoroom.utf8))
        // The test process blocks most signals in the thread that spawns children, and a child
        // inherits that mask through exec: Janus would never see SIGTERM. A one-line Python
        // wrapper clears the mask and execs Janus (same pid).
        process = try ToolProcess(
            "/usr/bin/python3",
            [
                "-c", unblockSignalsAndExec, "/usr/bin/janus", "-C", dir.file("janus.jcfg"), "-F", dir.path, "-L",
                dir.file("janus.log"), "-o",
            ],
            cwd: dir.path)
    }

    /// Starts Janus and waits until it answers (`waitUntilReady`); throws `JanusNotReady` with
    /// the reason and the log tail when it does not (the server is stopped then).
    /// A port another process took after `cliFreePort` chose it is tried again with a new one
    /// (at most three times).
    package static func started(seconds: Double = 15) async throws -> JanusServer {
        for attempt in 1...3 {
            let janus = try JanusServer()
            do {
                try await janus.waitUntilReady(seconds: seconds)
                return janus
            } catch let e as JanusNotReady where attempt < 3 && e.detail.contains("Couldn't start webserver") {
                continue
            }
        }
        preconditionFailure("unreachable: the third attempt returns or throws")
    }

    /// The HTTP transport's address.
    package var address: SocketAddress { .loopbackIPv4(port: UInt16(port)) }

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
                let info = try await JanusSession.info(server: address, timeoutSeconds: 1)
                if info["plugins"]?[JanusVideoRoom.plugin] != nil { return }
                last = "info without the VideoRoom plugin"
            } catch {
                last = "\(error)"
            }
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
        let tail = logTail()
        stop()
        throw JanusNotReady(
            detail: "janus on 127.0.0.1:\(port) did not answer /janus/info within \(seconds) s (\(last)); log: \(tail)")
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
    package var description: String { detail }
}
