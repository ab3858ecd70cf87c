/// Chooses the size a congestion-controlled video stream encodes at, in the manner of
/// libwebrtc's quality scaler: when the encoder's quantizer stays high (or its rate control drops
/// most frames) the target bitrate is too low for the size, so the picture is made smaller; when
/// the quantizer stays low there is room for a larger one. Steps alternate 3/4 and 2/3 of each
/// side (640x480, 480x360, 320x240, 240x180, ...), never below `minimumPixels` and never above the
/// stream's own size.
///
/// Thread rule: a value type, used by the stream's worker only. Cost: a few additions per frame;
/// one decision per `interval` at most.
package struct VideoQualityScaler: Sendable {
    /// Tuning; the defaults are libwebrtc's VP8 ones where it has one.
    package struct Settings: Sendable, Equatable {
        /// Average quantizer (the bitstream's 0...127 scale for VP8) above which the size goes
        /// down, and below which it goes up.
        package var highQuantizer = 95, lowQuantizer = 29
        /// Share of frames the rate control dropped at which the size goes down whatever the
        /// quantizer.
        package var dropShare = 0.6
        /// Frames a decision needs, and the time it looks back over (nanoseconds).
        package var minimumFrames = 15
        package var intervalNs: Int64 = 1_000_000_000
        /// The smallest picture it scales to (320x180).
        package var minimumPixels = 320 * 180
        package init() {}
    }

    /// What the scaler asks for after a frame.
    package enum Decision: Equatable, Sendable {
        case keep
        case resize(width: Int, height: Int)
    }

    package let settings: Settings
    /// The stream's own size: the largest the scaler goes back up to.
    package private(set) var fullWidth: Int, fullHeight: Int
    /// How many steps below the full size the stream is now (0: full size).
    package private(set) var step = 0
    private var windowStartNs: Int64 = .min
    private var frames = 0, dropped = 0, quantizerSum = 0

    /// A scaler for a stream of `width` x `height`.
    package init(width: Int, height: Int, settings: Settings = Settings()) {
        self.settings = settings
        fullWidth = width
        fullHeight = height
    }

    /// The size `step` steps below `width` x `height`: alternately 3/4 and 2/3 of each side, even.
    package static func size(width: Int, height: Int, step: Int) -> (width: Int, height: Int) {
        var w = Double(width), h = Double(height)
        for i in 0..<step {
            let f = i % 2 == 0 ? 3.0 / 4.0 : 2.0 / 3.0
            w *= f
            h *= f
        }
        return (max(2, Int(w) & ~1), max(2, Int(h) & ~1))
    }

    /// The size it encodes at now.
    package var current: (width: Int, height: Int) { Self.size(width: fullWidth, height: fullHeight, step: step) }

    /// A new full size (the application changed the stream's resolution): starts over at it.
    package mutating func reset(width: Int, height: Int) {
        fullWidth = width
        fullHeight = height
        step = 0
        startWindow(at: .min)
    }

    /// One frame at capture time `nowNs`: encoded with `quantizer`, or dropped by the rate
    /// control (`quantizer` nil). Returns a new size when the window that just closed asks for
    /// one; the window starts over after every decision.
    package mutating func observe(quantizer: Int?, nowNs: Int64) -> Decision {
        if windowStartNs == .min || nowNs < windowStartNs { startWindow(at: nowNs) }
        frames += 1
        if let quantizer { quantizerSum += quantizer } else { dropped += 1 }
        guard nowNs - windowStartNs >= settings.intervalNs, frames >= settings.minimumFrames else { return .keep }
        let encoded = frames - dropped, anyDropped = dropped > 0
        let average = encoded > 0 ? quantizerSum / encoded : Int.max
        let dropShare = Double(dropped) / Double(frames)
        startWindow(at: nowNs)
        if average > settings.highQuantizer || dropShare >= settings.dropShare {
            let next = Self.size(width: fullWidth, height: fullHeight, step: step + 1)
            guard next.width * next.height >= settings.minimumPixels else { return .keep }
            step += 1
            return .resize(width: next.width, height: next.height)
        }
        if average < settings.lowQuantizer && !anyDropped && step > 0 {
            step -= 1
            let next = current
            return .resize(width: next.width, height: next.height)
        }
        return .keep
    }

    private mutating func startWindow(at nowNs: Int64) {
        windowStartNs = nowNs
        frames = 0
        dropped = 0
        quantizerSum = 0
    }
}
