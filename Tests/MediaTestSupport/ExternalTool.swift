// Finding and running the external tools (GStreamer, ffmpeg) that media tests check our output with.
import Foundation

/// External command-line tools for tests: where they are and a quiet run.
package enum ExternalTool {
    /// The tool's path in /usr/bin or /usr/local/bin, or nil when it is not installed.
    package static func path(_ name: String) -> String? {
        ["/usr/bin", "/usr/local/bin"].map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs the installed tool `name` with `args`, output discarded; its exit status.
    @discardableResult
    package static func run(_ name: String, _ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path(name)!)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}
