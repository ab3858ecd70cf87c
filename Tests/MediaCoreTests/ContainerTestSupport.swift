import Foundation
import MediaCore
import MediaTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh temporary directory, removed by `remove()` (tests call it in `defer`).
struct ContainerTempDir {
    let path: String

    init() {
        var template = Array(
            "\(NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory())/revue-containers-XXXXXX"
                .utf8CString)
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

/// Feeds `read` every truncation of `bytes` and `mutations` randomly corrupted copies: each must
/// either succeed or throw a `ContainerError` that names the file. A crash fails the whole run.
/// Returns how many variants threw.
func exerciseCorruptions(
    of bytes: [UInt8], in dir: ContainerTempDir, mutations: Int = 200,
    truncationStep: Int = 1, read: (String) throws -> Void
) -> (errors: Int, unnamed: [String]) {
    var errors = 0
    var unnamed: [String] = []
    var variants: [[UInt8]] = stride(from: 0, to: bytes.count, by: truncationStep).map { Array(bytes.prefix($0)) }
    var rng = TestRandom(state: 42)
    for _ in 0..<mutations {
        var b = bytes
        for _ in 0..<(1 + rng.below(4)) {
            let i = rng.below(b.count)
            b[i] = rng.below(3) == 0 ? 0xFF : UInt8(truncatingIfNeeded: rng.next())
        }
        variants.append(b)
    }
    let path = dir.file("variant.bin")
    for v in variants {
        _ = dir.write("variant.bin", v)
        do { try read(path) } catch {
            errors += 1
            if !"\(error)".hasPrefix("\(path): ") { unnamed.append("\(error)") }
        }
    }
    return (errors, unnamed)
}
