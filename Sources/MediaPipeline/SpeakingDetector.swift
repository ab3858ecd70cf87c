#if canImport(Glibc)
    import Glibc
#endif

/// Decides from per-frame audio levels whether a track's owner is speaking.
///
/// It compares each frame's level (dBov, RFC 6464 scale) with a noise floor taken as a low
/// percentile of the last `floorWindow` frames, so a steady noise source lifts the floor and never
/// counts as speech, while the dips between syllables keep the floor low during real speech.
/// A frame is *active* when it is `marginDb` above that floor and louder than `minimumLevel`.
/// Speaking starts when `attackFrames` of the last `attackWindow` frames are active, and stops
/// after `hangover` of inactivity, so short pauses do not make it flicker.
/// Thread rule: one thread (the audio send worker). Cost: O(window) per frame, no allocation
/// after `init`.
public struct SpeakingDetector: Sendable {
    /// Tuning of the detector; the defaults suit 10-20 ms frames of speech.
    public struct Configuration: Sendable, Equatable {
        /// How far above the noise floor a frame must be to count as active, in dB.
        public var marginDb: Float = 9
        /// Frames quieter than this (dBov, negative) are never active.
        public var minimumLevel: Float = -55
        /// Frames (of `frameDurationMs`) the noise floor looks back over.
        public var floorWindow: Int = 100
        /// Percentile (0...1) of that window taken as the floor.
        public var floorPercentile: Float = 0.1
        /// Active frames needed within `attackWindow` frames to start speaking.
        public var attackFrames: Int = 3
        /// Window for the attack decision, in frames.
        public var attackWindow: Int = 5
        /// Inactive time after which speaking stops, in milliseconds.
        public var hangoverMs: Int = 500
        /// Duration of one frame, in milliseconds.
        public var frameDurationMs: Int = 20
        /// The default thresholds and timings.
        public init() {}
    }

    /// A change in the speaking decision.
    public enum Event: Sendable, Equatable {
        case startedSpeaking
        case stoppedSpeaking
    }

    /// The thresholds and timings the detector was made with.
    public let configuration: Configuration
    /// Whether the detector currently considers the source to be speaking.
    public private(set) var isSpeaking = false
    /// A smoothed level (dBov, negative) of recent active frames; orders the loudest-first list.
    public private(set) var speechLevel: Float = -127
    /// The current noise floor estimate (dBov, negative).
    public private(set) var noiseFloor: Float = -127

    private var history: [Float]
    private var sorted: [Float]
    private var historyCount = 0
    private var historyNext = 0
    private var recentActive: UInt64 = 0
    private var inactiveMs = 0

    /// Creates a detector; allocates its level history once.
    public init(configuration: Configuration = Configuration()) {
        precondition(
            configuration.floorWindow > 0 && (1...64).contains(configuration.attackWindow)
                && (1...configuration.attackWindow).contains(configuration.attackFrames)
                && configuration.frameDurationMs > 0, "invalid SpeakingDetector configuration")
        self.configuration = configuration
        history = [Float](repeating: -127, count: configuration.floorWindow)
        sorted = [Float](repeating: -127, count: configuration.floorWindow)
    }

    /// Feeds one frame's level in dBov (0 is full scale, -127 silence; positive values are clamped)
    /// and returns the decision change it causes, if any.
    public mutating func process(levelDbov rawLevel: Float) -> Event? {
        let level = min(0, max(-127, rawLevel))
        noiseFloor = updateFloor(with: level)
        let active = level >= configuration.minimumLevel && level >= noiseFloor + configuration.marginDb
        let mask: UInt64 = configuration.attackWindow == 64 ? ~0 : (1 << UInt64(configuration.attackWindow)) - 1
        recentActive = ((recentActive << 1) | (active ? 1 : 0)) & mask
        if active {
            inactiveMs = 0
            speechLevel = speechLevel <= -127 ? level : 0.8 * speechLevel + 0.2 * level
        } else {
            inactiveMs += configuration.frameDurationMs
        }
        if !isSpeaking, recentActive.nonzeroBitCount >= configuration.attackFrames {
            isSpeaking = true
            return .startedSpeaking
        }
        if isSpeaking, inactiveMs >= configuration.hangoverMs {
            isSpeaking = false
            speechLevel = -127
            return .stoppedSpeaking
        }
        return nil
    }

    /// Inserts `level` into the history and returns the configured percentile of it.
    /// Keeps `sorted` ordered by replacing the evicted value in place (insertion step), O(window).
    private mutating func updateFloor(with level: Float) -> Float {
        let window = history.count
        if historyCount < window {
            history[historyNext] = level
            var i = historyCount
            sorted[i] = level
            while i > 0 && sorted[i - 1] > sorted[i] { sorted.swapAt(i - 1, i); i -= 1 }
            historyCount += 1
        } else {
            let evicted = history[historyNext]
            history[historyNext] = level
            var i = 0
            while sorted[i] != evicted { i += 1 }
            sorted[i] = level
            while i > 0 && sorted[i - 1] > sorted[i] { sorted.swapAt(i - 1, i); i -= 1 }
            while i + 1 < window && sorted[i + 1] < sorted[i] { sorted.swapAt(i + 1, i); i += 1 }
        }
        historyNext = (historyNext + 1) % window
        let index = min(historyCount - 1, Int(Float(historyCount - 1) * configuration.floorPercentile))
        return sorted[index]
    }
}
