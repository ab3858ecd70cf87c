#if canImport(Glibc)
    import Glibc
#endif

/// An error from a container reader or writer (Y4M, WAV, IVF, Ogg, SDP): what kind of problem, which
/// file, and a sentence a user can act on. `description` reads like
/// `input.y4m: frame 37 is truncated (got 412800 of 1382400 bytes)`.
/// Thread rule: a value type. Cost: holds two strings.
public struct ContainerError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The category of a container error, shaped like swift-system's `Errno`: match on it rather
    /// than on the message.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The category number (not an errno).
        public var rawValue: Int32
        /// The value with this raw code.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The file does not exist (`ENOENT`).
        public static let notFound = Kind(rawValue: 1)
        /// Permission denied opening, creating or renaming a file (`EACCES`, `EPERM`, `EROFS`).
        public static let permissionDenied = Kind(rawValue: 2)
        /// Any other system call failure (`EIO`, `ENOSPC`, `EISDIR`...); `errno` holds the code.
        public static let io = Kind(rawValue: 3)
        /// The file does not start with the format's magic bytes (it is not that format).
        public static let badMagic = Kind(rawValue: 4)
        /// A header or field is malformed (a number that does not parse, a missing field).
        public static let malformed = Kind(rawValue: 5)
        /// Well-formed, but a variant this implementation does not handle (4:4:4 Y4M, 24-bit WAV).
        public static let unsupported = Kind(rawValue: 6)
        /// The file ends in the middle of a header, frame, chunk or page.
        public static let truncated = Kind(rawValue: 7)
        /// A size beyond what is sane (16384x16384 video, a 3 GB frame): rejected before allocating.
        public static let tooLarge = Kind(rawValue: 8)
        /// Content failed an integrity check (an Ogg page CRC).
        public static let corrupt = Kind(rawValue: 9)
        /// The writer's output would exceed the format's limits (a 4 GiB RIFF file).
        public static let limitExceeded = Kind(rawValue: 10)

        /// The category name (`truncated`, `badMagic`...).
        public var description: String {
            switch self {
            case .notFound: return "notFound"
            case .permissionDenied: return "permissionDenied"
            case .io: return "io"
            case .badMagic: return "badMagic"
            case .malformed: return "malformed"
            case .unsupported: return "unsupported"
            case .truncated: return "truncated"
            case .tooLarge: return "tooLarge"
            case .corrupt: return "corrupt"
            case .limitExceeded: return "limitExceeded"
            default: return "Kind(\(rawValue))"
            }
        }
    }

    /// What went wrong, for matching.
    public var kind: Kind
    /// The file (or SDP source name) the problem is in.
    public var path: String
    /// What is wrong, without the path: `frame 37 is truncated (got 412800 of 1382400 bytes)`.
    public var message: String
    /// The C `errno` when a system call failed, else 0.
    public var errno: Int32

    /// An error of `kind` in `path`; `message` says what is wrong without repeating the path.
    public init(_ kind: Kind, path: String, _ message: String, errno: Int32 = 0) {
        self.kind = kind; self.path = path; self.message = message; self.errno = errno
    }

    /// `path: message`.
    public var description: String { "\(path): \(message)" }

    /// An error for a failed system call, classified by `errno`.
    static func system(_ what: String, path: String, errno code: Int32) -> ContainerError {
        let kind: Kind
        switch code {
        case ENOENT, ENOTDIR: kind = .notFound
        case EACCES, EPERM, EROFS: kind = .permissionDenied
        default: kind = .io
        }
        let text = String(cString: strerror(code))
        return ContainerError(kind, path: path, "\(what): \(text)", errno: code)
    }
}

/// An exact rational number (a frame rate `30000/1001`, a time base `1/90000`) as containers store it.
/// Thread rule: a value type. Cost: none.
public struct ContainerRational: Hashable, Sendable, CustomStringConvertible {
    /// The numerator as stored (not reduced).
    public var numerator: Int
    /// The denominator as stored (not reduced).
    public var denominator: Int
    /// `numerator/denominator`, stored as given.
    public init(_ numerator: Int, _ denominator: Int) {
        self.numerator = numerator; self.denominator = denominator
    }
    /// The value as a `Double` (0 when the denominator is 0).
    public var doubleValue: Double { denominator == 0 ? 0 : Double(numerator) / Double(denominator) }
    /// `num/den`.
    public var description: String { "\(numerator)/\(denominator)" }
}
