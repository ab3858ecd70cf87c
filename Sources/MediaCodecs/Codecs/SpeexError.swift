internal import CMediaShims

/// An error reported by speexdsp (`Resampler`, `AudioProcessor`), shaped like swift-system's
/// `Errno`: the raw value is a `RESAMPLER_ERR_*` code (the preprocessor only fails to allocate).
/// Thread rule: a value, `Sendable`.
public struct SpeexError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The speexdsp status code (positive).
    public let rawValue: Int32

    /// Wraps a speexdsp status code.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `RESAMPLER_ERR_ALLOC_FAILED`: memory allocation failed (also the preprocessor's NULL state).
    public static let allocationFailed = SpeexError(rawValue: Int32(RESAMPLER_ERR_ALLOC_FAILED))
    /// `RESAMPLER_ERR_BAD_STATE`: the resampler state is unusable.
    public static let badState = SpeexError(rawValue: Int32(RESAMPLER_ERR_BAD_STATE))
    /// `RESAMPLER_ERR_INVALID_ARG`: a rate, channel count or quality was rejected.
    public static let invalidArgument = SpeexError(rawValue: Int32(RESAMPLER_ERR_INVALID_ARG))
    /// `RESAMPLER_ERR_PTR_OVERLAP`: input and output buffers overlap.
    public static let pointerOverlap = SpeexError(rawValue: Int32(RESAMPLER_ERR_PTR_OVERLAP))
    /// `RESAMPLER_ERR_OVERFLOW`: a rate ratio or buffer length overflowed.
    public static let overflow = SpeexError(rawValue: Int32(RESAMPLER_ERR_OVERFLOW))

    /// speexdsp's own text for the code (`speex_resampler_strerror`).
    public var description: String { "\(String(cString: speex_resampler_strerror(rawValue))) (\(rawValue))" }
}
