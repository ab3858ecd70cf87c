internal import CMediaShims

// Typed settings shared by `OpusEncoder`, `OpusDecoder` and `OpusPacket`. All are plain values.

/// A sample rate libopus can encode and decode at (RFC 6716 section 2: 8, 12, 16, 24 or 48 kHz).
public enum OpusSampleRate: Int, CaseIterable, Sendable, CustomStringConvertible {
    case hz8000 = 8000
    case hz12000 = 12000
    case hz16000 = 16000
    case hz24000 = 24000
    case hz48000 = 48000

    /// The rate in Hz, or nil when libopus does not support it (resample first; see `Resampler`).
    public init?(hertz: Int) { self.init(rawValue: hertz) }

    /// Samples per second per channel.
    public var hertz: Int { rawValue }

    /// A readable description, for logs and error messages.
    public var description: String { "\(rawValue) Hz" }
}

/// The coding mode libopus optimises for (`OPUS_APPLICATION_*`).
public enum OpusApplication: Sendable, CaseIterable {
    /// `OPUS_APPLICATION_VOIP`: speech intelligibility, favours SILK/hybrid.
    case voip
    /// `OPUS_APPLICATION_AUDIO`: fidelity to the input, favours CELT.
    case audio
    /// `OPUS_APPLICATION_RESTRICTED_LOWDELAY`: CELT only, 2.5 ms less delay.
    case restrictedLowDelay

    var cValue: Int32 {
        switch self {
        case .voip: OPUS_APPLICATION_VOIP
        case .audio: OPUS_APPLICATION_AUDIO
        case .restrictedLowDelay: OPUS_APPLICATION_RESTRICTED_LOWDELAY
        }
    }
}

/// The duration of one Opus frame (RFC 6716 section 2.1.4: 2.5, 5, 10, 20, 40 or 60 ms per encode
/// call). 20 ms is the usual real-time choice; SILK (voice) needs 10 ms or more.
public enum OpusFrameDuration: Int, CaseIterable, Sendable, CustomStringConvertible {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // The underscore stands for the decimal point of 2.5 ms.
    case ms2_5 = 2500
    case ms5 = 5000
    case ms10 = 10000
    case ms20 = 20000
    case ms40 = 40000
    case ms60 = 60000

    /// The duration in microseconds.
    public var microseconds: Int { rawValue }

    /// Samples per channel in one frame at `sampleRate` (e.g. 960 for 20 ms at 48 kHz).
    public func samples(at sampleRate: OpusSampleRate) -> Int { sampleRate.rawValue / 1000 * rawValue / 1000 }

    /// The frame duration holding `samples` samples per channel at `sampleRate`, or nil if none does.
    public init?(samples: Int, sampleRate: OpusSampleRate) {
        // Arithmetic, not a search of allCases: this runs on every encode and must not allocate.
        guard samples > 0, samples <= sampleRate.rawValue else { return nil }
        let (microseconds, remainder) = (samples * 1_000_000).quotientAndRemainder(dividingBy: sampleRate.rawValue)
        guard remainder == 0 else { return nil }
        self.init(rawValue: microseconds)
    }

    /// A readable description, for logs and error messages.
    public var description: String { rawValue % 1000 == 0 ? "\(rawValue / 1000) ms" : "\(Double(rawValue) / 1000) ms" }
}

/// An encoder bitrate: bits per second (500...512_000), `.auto` or `.max`. Integer literals work:
/// `encoder.bitrate = 32_000`.
public struct OpusBitrate: Hashable, Sendable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    /// The value passed to `OPUS_SET_BITRATE`: bits per second, `OPUS_AUTO` or `OPUS_BITRATE_MAX`.
    public let rawValue: Int32

    /// Let libopus choose from the sample rate and channel count (`OPUS_AUTO`).
    public static let auto = OpusBitrate(raw: OPUS_AUTO)
    /// As many bits as the packet size allows (`OPUS_BITRATE_MAX`).
    public static let max = OpusBitrate(raw: OPUS_BITRATE_MAX)

    /// The range libopus accepts for explicit bitrates.
    public static let validRange = 500...512_000

    /// An explicit bitrate; traps outside `validRange` (a programmer error).
    public init(bitsPerSecond: Int) {
        precondition(Self.validRange.contains(bitsPerSecond), "Opus bitrate \(bitsPerSecond) outside \(Self.validRange)")
        self.rawValue = Int32(bitsPerSecond)
    }

    /// A literal in bits per second: `bitrate = 32_000`.
    public init(integerLiteral value: Int) { self.init(bitsPerSecond: value) }

    init(raw: Int32) { self.rawValue = raw }

    /// Bits per second, or nil for `.auto` and `.max`.
    public var bitsPerSecond: Int? { rawValue > 0 ? Int(rawValue) : nil }

    /// A readable description, for logs and error messages.
    public var description: String {
        switch rawValue {
        case OPUS_AUTO: "auto"
        case OPUS_BITRATE_MAX: "max"
        default: "\(rawValue) b/s"
        }
    }
}

/// A hint about the input (`OPUS_SET_SIGNAL`), steering the SILK/CELT mode decision.
public enum OpusSignal: Sendable, CaseIterable {
    /// `OPUS_AUTO`: libopus analyses the input.
    case auto
    /// `OPUS_SIGNAL_VOICE`: bias towards SILK.
    case voice
    /// `OPUS_SIGNAL_MUSIC`: bias towards CELT.
    case music

    var cValue: Int32 {
        switch self {
        case .auto: OPUS_AUTO
        case .voice: OPUS_SIGNAL_VOICE
        case .music: OPUS_SIGNAL_MUSIC
        }
    }

    init(cValue: Int32) {
        switch cValue {
        case OPUS_SIGNAL_VOICE: self = .voice
        case OPUS_SIGNAL_MUSIC: self = .music
        default: self = .auto
        }
    }
}

/// An audio bandpass (RFC 6716 section 2, table 1), ordered from narrow to full.
public enum OpusBandwidth: Int, Comparable, CaseIterable, Sendable, CustomStringConvertible {
    /// `OPUS_BANDWIDTH_NARROWBAND`: 4 kHz bandpass (8 kHz effective sample rate).
    case narrowband = 1101
    /// `OPUS_BANDWIDTH_MEDIUMBAND`: 6 kHz bandpass.
    case mediumband = 1102
    /// `OPUS_BANDWIDTH_WIDEBAND`: 8 kHz bandpass.
    case wideband = 1103
    /// `OPUS_BANDWIDTH_SUPERWIDEBAND`: 12 kHz bandpass.
    case superwideband = 1104
    /// `OPUS_BANDWIDTH_FULLBAND`: 20 kHz bandpass.
    case fullband = 1105

    /// The upper edge of the audio band in Hz.
    public var bandpassHertz: Int {
        switch self {
        case .narrowband: 4000
        case .mediumband: 6000
        case .wideband: 8000
        case .superwideband: 12000
        case .fullband: 20000
        }
    }

    /// Ordered by raw value.
    public static func < (lhs: OpusBandwidth, rhs: OpusBandwidth) -> Bool { lhs.rawValue < rhs.rawValue }

    /// A readable description, for logs and error messages.
    public var description: String {
        switch self {
        case .narrowband: "narrowband"
        case .mediumband: "mediumband"
        case .wideband: "wideband"
        case .superwideband: "superwideband"
        case .fullband: "fullband"
        }
    }
}
