import Testing
import Foundation

/// The interop tests need these independent peers; scripts/install-deps installs them.
@Suite struct ToolsPresentTests {
    @Test(arguments: ["ffmpeg", "ffprobe", "gst-launch-1.0", "opusinfo", "tshark", "vpxenc"])
    func peerIsInstalled(_ tool: String) {
        let found = ["/usr/bin", "/usr/local/bin", "/bin"].contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
        }
        #expect(found, "\(tool) missing: run scripts/install-deps")
    }
}
