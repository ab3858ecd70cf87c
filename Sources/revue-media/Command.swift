// The command table and what every command shares: --help, --quiet, file kinds by extension.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// One `revue-media` command.
protocol Command {
    /// The word on the command line.
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// The text `--help` prints.
    static var help: String { get }
    /// Runs with the arguments after the command word; returns the exit status.
    static func run(_ args: [String]) throws -> Int32
}

/// What kind of media file a path names, from its extension (outputs) or magic bytes (inputs).
enum MediaFileKind: String {
    case y4m, wav, ivf, ogg, sdp, pcap

    /// From the file name's extension: `.y4m`, `.wav`, `.ivf`, `.ogg`/`.opus`, `.sdp`, `.pcap`.
    init?(extensionOf path: String) {
        let name = path.split(separator: "/").last ?? ""
        let fileExtension = name.lastIndex(of: ".").map { name[name.index(after: $0)...] } ?? ""
        switch fileExtension.lowercased() {
        case "y4m": self = .y4m
        case "wav", "wave": self = .wav
        case "ivf": self = .ivf
        case "ogg", "opus", "oga": self = .ogg
        case "sdp": self = .sdp
        case "pcap": self = .pcap
        default: return nil
        }
    }

    /// From the first bytes of the file; nil when they match no format read here. Throws for a
    /// missing or unreadable file, naming it.
    static func sniff(_ path: String) throws -> MediaFileKind? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw InputError(description: errno == EACCES ? "\(path): permission denied" : "\(path): no such file")
        }
        if info.st_mode & S_IFMT == S_IFDIR { throw InputError(description: "\(path): is a directory") }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw InputError(description: "\(path): permission denied") }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 16)
        let count = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        head.removeLast(16 - max(0, count))
        func starts(_ s: String) -> Bool { head.starts(with: Array(s.utf8)) }
        if starts("YUV4MPEG2") { return .y4m }
        if starts("RIFF") || starts("RF64") { return .wav }
        if starts("DKIF") { return .ivf }
        if starts("OggS") { return .ogg }
        if starts("v=0") { return .sdp }
        if head.count >= 4, [[0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0xc3, 0xd4]].contains(Array(head[0..<4])) { return .pcap }
        if head.isEmpty { throw InputError(description: "\(path): the file is empty") }
        return nil
    }
}

extension Arguments {
    /// The common `--quiet` flag.
    var quiet: Bool { flag("--quiet") || flag("-q") }
}

/// Whether `args` ask for help.
func wantsHelp(_ args: [String]) -> Bool { args.contains("--help") || args.contains("-h") }

/// Checks that an output's directory exists, so the error names the output rather than a
/// temporary file.
func checkOutputDirectory(_ path: String, option: String = "-o") throws {
    let slash = path.lastIndex(of: "/")
    let dir = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? ""
    var isDir = false
    if !dir.isEmpty {
        if !FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            throw InputError(description: "\(path): directory \(dir) does not exist")
        }
        if !isDir { throw InputError(description: "\(path): \(dir) is not a directory") }
    }
    if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir {
        throw InputError(description: "\(path): is a directory")
    }
}
