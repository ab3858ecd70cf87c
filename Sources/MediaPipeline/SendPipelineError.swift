/// Why a send stream could not be created or reconfigured, shaped like swift-system's `Errno`:
/// a code plus a message naming what failed. Only control-plane calls throw; the per-frame path
/// counts its failures in the statistics instead.
/// Thread rule: a value type. Cost: none.
public struct SendPipelineError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The failure class.
    public let rawValue: Int
    /// What failed, with the underlying library's words.
    public let message: String

    /// The value with this raw code.
    public init(rawValue: Int) { self.rawValue = rawValue; message = "" }
    init(_ code: SendPipelineError, _ message: String) { rawValue = code.rawValue; self.message = message }

    /// Equal when the codes (raw values) are equal.
    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    /// Hashes what `==` compares.
    public func hash(into h: inout Hasher) { h.combine(rawValue) }
    /// A readable description, for logs and error messages.
    public var description: String { message.isEmpty ? "send pipeline error \(rawValue)" : message }

    /// libvpx refused the encoder configuration (`VPXError`).
    public static let encoder = SendPipelineError(rawValue: 1)
    /// libopus refused the encoder configuration (`OpusError`).
    public static let audioEncoder = SendPipelineError(rawValue: 2)
    /// libsrtp refused the key material (`SRTPError`).
    public static let srtp = SendPipelineError(rawValue: 3)
    /// speexdsp refused the resampler (`SpeexError`).
    public static let resampler = SendPipelineError(rawValue: 4)
}
