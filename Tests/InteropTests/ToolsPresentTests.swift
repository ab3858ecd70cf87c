import Foundation
import Testing

/// The interop tests need these independent peers; scripts/install-deps installs them.
@Suite struct ToolsPresentTests {
    @Test(arguments: ["ffmpeg", "ffprobe", "gst-launch-1.0", "opusinfo", "tshark", "vpxenc", "chromium", "janus"])
    func peerIsInstalled(_ tool: String) {
        let found = ["/usr/bin", "/usr/local/bin", "/bin"].contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
        }
        #expect(found, "\(tool) missing: run scripts/install-deps")
    }

    /// aiortc lives in the repository's own virtual environment (.venv-interop), and webrtcbin is
    /// reached through the system Python's GObject bindings.
    @Test func webRTCPythonPeersAreInstalled() {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let checks = [
            (root + "/.venv-interop/bin/python3", "import aiortc"),
            ("/usr/bin/python3", "import gi; gi.require_version('GstWebRTC', '1.0'); from gi.repository import GstWebRTC"),
        ]
        for (python, statement) in checks {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: python)
            p.arguments = ["-c", statement]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            let ran = (try? p.run()) != nil
            if ran { p.waitUntilExit() }
            #expect(ran && p.terminationStatus == 0, "\(python) -c \"\(statement)\" failed: run scripts/install-deps")
        }
    }
}
