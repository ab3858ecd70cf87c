/// Why a `ColorConverter` call or a `PixelBufferView` initialiser refused its input. Shaped like
/// swift-system's `Errno`: a code (`rawValue`) with named statics; `message` names the plane or
/// buffer and the numbers that are wrong. Equality compares codes only, so
/// `#expect(throws: ColorConversionError.invalidStride)` works.
/// Thread rule: a value type. Cost: building the message allocates (error path only).
public struct ColorConversionError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code.
    public let rawValue: Int32
    /// What is wrong, for logs and errors shown to developers.
    public let message: String

    /// An error with `rawValue` and no message.
    public init(rawValue: Int32) { self.rawValue = rawValue; message = "" }

    /// An error with the code of `code` and a message.
    public init(_ code: ColorConversionError, _ message: String) {
        rawValue = code.rawValue
        self.message = message
    }

    /// Width or height is zero, negative or above 16384 (libyuv would return -1 or misbehave).
    public static let invalidSize = ColorConversionError(rawValue: 1)
    /// A stride is smaller than the bytes of one row of its plane (libyuv would read the wrong rows).
    public static let invalidStride = ColorConversionError(rawValue: 2)
    /// A plane the format needs is missing (nil base address; libyuv returns -1 for NULL planes).
    public static let missingPlane = ColorConversionError(rawValue: 3)
    /// A buffer holds fewer bytes than its size and stride need (libyuv would read or write past it).
    public static let bufferTooSmall = ColorConversionError(rawValue: 4)
    /// The requested format is not valid for this call (for example an output format that is not RGB).
    public static let unsupportedFormat = ColorConversionError(rawValue: 5)
    /// libyuv itself returned its failure code -1 (it found the arguments invalid).
    public static let conversionFailed = ColorConversionError(rawValue: 6)

    /// Equal when the codes (raw values) are equal.
    public static func == (a: ColorConversionError, b: ColorConversionError) -> Bool { a.rawValue == b.rawValue }
    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// A readable description, for logs and error messages.
    public var description: String {
        let name: String
        switch rawValue {
        case 1: name = "invalidSize"
        case 2: name = "invalidStride"
        case 3: name = "missingPlane"
        case 4: name = "bufferTooSmall"
        case 5: name = "unsupportedFormat"
        case 6: name = "conversionFailed"
        default: name = "ColorConversionError(\(rawValue))"
        }
        return message.isEmpty ? name : "\(name): \(message)"
    }
}
