// Peer programs driven over JSON lines (aiortc, headless Chromium, webrtcbin in scripts/webrtc),
// shared by the interop and session suites.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A peer program that reads one JSON command per line on stdin and writes one JSON reply per line
/// on stdout (`{"sdp": ...}`, `{"state": ...}` or `{"error": ...}`).
package final class JSONLinePeer: @unchecked Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    package let process = Process()
    private let input = Pipe(), output = Pipe(), errors = Pipe()
    private let lines = Mutex<[String]>([])
    private let errorText = Mutex<String>("")
    private var consumed = 0
    package let name: String

    package init(name: String, executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        self.name = name
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Failure(description: "\(name): \(executable) is missing: run scripts/install-deps")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        let reader = output.fileHandleForReading, errReader = errors.fileHandleForReading
        readLines(of: reader) { [weak self] line in self?.lines.withLock { $0.append(line) } }
        Thread { [weak self] in
            while true {
                let chunk = errReader.availableData
                if chunk.isEmpty { return }
                self?.errorText.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }.start()
        try process.run()
    }

    /// Sends `command` and waits up to `timeout` seconds for the reply; a reply with `error`, a
    /// peer that exits or one that does not answer in time throws with the peer's stderr.
    package func call(_ command: [String: String], timeout: Double = 90) throws -> [String: String] {
        let data = try JSONSerialization.data(withJSONObject: command)
        input.fileHandleForWriting.write(data + Data([10]))
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let line = lines.withLock({ $0.count > consumed ? $0[consumed] : nil }) {
                consumed += 1
                guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String] else {
                    throw Failure(description: "\(name) wrote \(line.prefix(300))")
                }
                if let e = obj["error"] { throw Failure(description: "\(name) refused \(command["op"] ?? "?"): \(e)") }
                return obj
            }
            if !process.isRunning || Date() > deadline {
                let why =
                    process.isRunning ? "did not answer in \(Int(timeout)) s" : "exited with status \(process.terminationStatus)"
                throw Failure(
                    description:
                        "\(name) \(why) on \(command["op"] ?? "?"); stderr:\n\(errorText.withLock { String($0.suffix(3000)) })")
            }
            usleep(10_000)
        }
    }

    /// Asks the peer to quit and waits for it (killing it after 5 s). Safe to call again.
    package func stop() {
        if process.isRunning { _ = try? call(["op": "quit"], timeout: 10) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

extension JSONLinePeer {
    /// Headless Chromium with the test page (`chromium_peer.py` and `chromium_page.html` in
    /// `scripts`), its profile in a fresh temporary directory (remove it after `stop()`).
    package static func chromium(scripts: String) throws -> (JSONLinePeer, InteropTempDir) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw Failure(description: "chromium is not installed: run scripts/install-deps")
        }
        let dir = InteropTempDir()
        let peer = try JSONLinePeer(
            name: "chromium", executable: "/usr/bin/python3",
            arguments: [scripts + "/chromium_peer.py", dir.file("profile"), scripts + "/chromium_page.html"])
        return (peer, dir)
    }

    /// A command that runs the page function `function` with one string argument (or none).
    package static func js(_ function: String, _ argument: String? = nil) -> [String: String] {
        guard let argument else { return ["op": function, "js": "\(function)()"] }
        let quoted = String(decoding: try! JSONSerialization.data(withJSONObject: [argument]), as: UTF8.self)
        return ["op": function, "js": "\(function)(...\(quoted))"]
    }

    /// The test page's `mediaStats()` (connection state, inbound video and audio statistics).
    package func pageStats() throws -> [String: Any] {
        guard let text = try call(Self.js("mediaStats"))["sdp"],
            let stats = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        else { throw Failure(description: "\(name): mediaStats() gave no statistics") }
        return stats
    }
}
