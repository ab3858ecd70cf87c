/// Why `Revue.initialize(_:)` failed. Shaped like swift-system's `Errno`: a code you can compare
/// with the named statics, plus a message naming the input and what is wrong with it.
public struct RevueError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Sendable, Hashable {
        /// The code's number.
        public let rawValue: Int32
        /// The value with this raw code.
        public init(rawValue: Int32) { self.rawValue = rawValue }
        /// `initialize(_:)` was called twice without `destroy()`.
        public static let alreadyInitialized = Code(rawValue: 1)
        /// The data directory cannot be created, read, written or locked (another process uses it).
        public static let dataDirectory = Code(rawValue: 2)
        /// The profile in the data directory exists but cannot be read: the SDK refuses to start
        /// rather than silently creating a new identity.
        public static let corruptProfile = Code(rawValue: 3)
        /// The UDP socket cannot be created or bound (errno in the message).
        public static let socket = Code(rawValue: 4)
        /// A configuration value is invalid (bad host or rendezvous node).
        public static let invalidConfiguration = Code(rawValue: 5)
    }

    /// The kind of failure.
    public let code: Code
    /// What went wrong, naming the input.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A readable description, for logs and error messages.
    public var description: String { "RevueError(\(code.rawValue)): \(message)" }

    /// Lets `catch RevueError.corruptProfile` style matching work on codes.
    public static func ~= (code: Code, error: RevueError) -> Bool { error.code == code }
}
