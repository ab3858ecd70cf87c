internal import CMediaShims

/// An error reported by libopus, shaped like swift-system's `Errno`: the raw value is the negative
/// `OPUS_*` status code. Errors about packets from files or the network carry a `message` naming
/// the input; equality and hashing look only at the code, so `#expect(throws: OpusError.invalidPacket)`
/// and `catch OpusError.invalidPacket` work. Thread rule: a value, `Sendable`.
public struct OpusError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The libopus status code (negative).
    public let rawValue: Int32
    /// What was being done and with which input, when known (for logs; not part of equality).
    public let message: String?

    /// Wraps a libopus status code.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
        self.message = nil
    }

    /// Wraps a libopus status code with a message naming the input.
    public init(_ code: OpusError, _ message: String) {
        self.rawValue = code.rawValue
        self.message = message
    }

    /// `OPUS_BAD_ARG`: one or more arguments were invalid or out of range.
    public static let badArgument = OpusError(rawValue: OPUS_BAD_ARG)
    /// `OPUS_BUFFER_TOO_SMALL`: not enough bytes (encode) or samples (decode) in the output buffer.
    public static let bufferTooSmall = OpusError(rawValue: OPUS_BUFFER_TOO_SMALL)
    /// `OPUS_INTERNAL_ERROR`: an internal libopus error.
    public static let internalError = OpusError(rawValue: OPUS_INTERNAL_ERROR)
    /// `OPUS_INVALID_PACKET`: the compressed data is corrupted or not an Opus packet.
    public static let invalidPacket = OpusError(rawValue: OPUS_INVALID_PACKET)
    /// `OPUS_UNIMPLEMENTED`: the request number is not known to libopus.
    public static let unimplemented = OpusError(rawValue: OPUS_UNIMPLEMENTED)
    /// `OPUS_INVALID_STATE`: an encoder or decoder structure is invalid or already freed.
    public static let invalidState = OpusError(rawValue: OPUS_INVALID_STATE)
    /// `OPUS_ALLOC_FAIL`: libopus could not allocate memory.
    public static let allocationFailed = OpusError(rawValue: OPUS_ALLOC_FAIL)

    /// Equal when the codes (raw values) are equal.
    public static func == (lhs: OpusError, rhs: OpusError) -> Bool { lhs.rawValue == rhs.rawValue }
    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// Allows `catch OpusError.invalidPacket` patterns.
    public static func ~= (pattern: OpusError, value: any Error) -> Bool {
        (value as? OpusError)?.rawValue == pattern.rawValue
    }

    /// libopus's own text for the code (`opus_strerror`), followed by the message if any.
    public var description: String {
        let text = String(cString: opus_strerror(rawValue))
        if let message { return "\(message): \(text) (\(rawValue))" }
        return "\(text) (\(rawValue))"
    }
}

extension OpusError {
    /// Turns a negative libopus return value into an error with `message`.
    @inline(__always)
    static func check(_ status: Int32, _ message: @autoclosure () -> String) throws(OpusError) {
        if status < 0 { throw OpusError(OpusError(rawValue: status), message()) }
    }
}
