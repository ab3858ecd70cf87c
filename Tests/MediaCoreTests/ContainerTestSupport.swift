#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import MediaCore

/// A fresh temporary directory, removed by `remove()` (tests call it in `defer`).
struct ContainerTempDir {
    let path: String

    init() {
        var template = Array("\(NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory())/revue-containers-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil, "mkdtemp failed")
        path = String(cString: p!)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    /// Names in the directory (hidden temporaries included).
    var contents: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    func write(_ name: String, _ bytes: [UInt8]) -> String {
        let p = file(name)
        _ = FileManager.default.createFile(atPath: p, contents: Data(bytes))
        return p
    }

    func read(_ name: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: file(name)) ?? Data()) }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body`, returning the `ContainerError` it throws (nil when it does not throw).
/// Any other error is reported as a `ContainerError` of kind `Kind(rawValue: -1)`.
func containerError(_ body: () throws -> Void) -> ContainerError? {
    do { try body(); return nil } catch {
        return (error as? ContainerError) ?? ContainerError(ContainerError.Kind(rawValue: -1), path: "", "\(error)")
    }
}

/// Draws a deterministic gradient with per-frame motion into `frame`.
func drawContainerTestPattern(_ frame: VideoFrame, index: Int) {
    for r in 0..<frame.height {
        for c in 0..<frame.width { frame.y[r * frame.strideY + c] = UInt8(truncatingIfNeeded: r * 3 + c * 2 + index * 7) }
    }
    for r in 0..<frame.chromaHeight {
        for c in 0..<frame.chromaWidth {
            frame.u[r * frame.strideUV + c] = UInt8(truncatingIfNeeded: 128 + r - c + index)
            frame.v[r * frame.strideUV + c] = UInt8(truncatingIfNeeded: 64 + r + c * 3 - index)
        }
    }
}
