import Glibc

/// The playout delay a video stream needs, estimated per frame with the frame's size in mind, in
/// the manner of libwebrtc's `JitterEstimator`: a frame's delay grows with its size (the pacer, or
/// a slow link, needs time to send its bytes), so how late a frame completes is modelled as
/// `theta0 x size + noise`. A Kalman filter over consecutive frames (their size difference and the
/// difference of their delays, `delayDelta = theta0 x sizeDelta + theta1`) estimates `theta0`, the
/// milliseconds each byte takes; what is left after the size is taken out is the path's jitter.
///
/// The target delay is what a large delta frame needs, not what a keyframe needs: the completion
/// offset of an average frame (over the least-delayed path, `RTPJitterBuffer.baselineArrival`),
/// plus `theta0 x (large delta frame - average frame)`, plus `noiseDeviations` standard
/// deviations of the size-corrected jitter. Keyframes and other frames far above the average size
/// teach the filter the slope but stay out of the size statistics and the jitter, and the frames
/// queued behind one are not measured: a frame whose baseline arrival (when its first packet
/// would have arrived had nothing been ahead of it in the sender's pacer) comes before the
/// previous frame completed waited behind that frame, and when that frame was large or itself
/// waited behind a large one, the wait is the large frame's doing. A paced keyframe ten times the
/// delta frames' size leaves over several frame intervals: the frames captured meanwhile complete
/// late once, they do not raise every later frame's delay. Frames that waited for a
/// retransmission are not measured either (their delay is the repair's round trip, which hole
/// waits cover). Jitter samples are clipped to a few deviations, so one outlier moves the
/// estimate a little while a lasting change is followed within a dozen frames. The slope follows
/// a change of the link's rate slowly (tens of seconds, as libwebrtc's does); until it has, the
/// completion offset and the jitter take the change in.
///
/// Thread rule: a value owned by the video stream's thread. Cost: a few dozen floating-point
/// operations per frame; no allocation.
package struct VideoJitterEstimator: Sendable {
    /// Standard deviations of the size-corrected jitter the target covers (1.5: about 93 % of
    /// frames with normal jitter, all of them with jitter spread evenly over a range). A frame
    /// later than that is not lost: it leaves the buffer as soon as it is complete.
    package var noiseDeviations = 1.5

    // Kalman state: theta0 (ms per byte), theta1 (ms); covariance P; process noise Q.
    private var theta0 = 1.0 / 64_000  // 512 Mbit/s: the filter starts by assuming a fast link
    private var theta1 = 0.0
    private var p00 = 1e-4, p01 = 0.0, p10 = 0.0, p11 = 1e2
    private let q00 = 2.5e-10, q11 = 1e-10
    /// Variance of the deviation from the Kalman line (ms^2), for the filter's measurement noise
    /// and its outlier test.
    private var deltaNoiseVariance = 4.0
    private var deltaNoiseSamples = 1.0

    // Frame sizes (bytes).
    private var startupBytes = 0.0
    private var startupFrames = 0
    private var averageBytes: Double?
    private var bytesVariance = 100.0
    private var largeBytes = 0.0

    // Completion offset of an average frame over the baseline, and its jitter (ms).
    private var level: Double?
    private var levelVariance = 1.0
    private var levelSamples = 0.0

    private var previous: (timestamp: UInt32, completedNs: UInt64, bytes: Double)?
    /// The previous frame was large, or waited in the sender's queue behind a large one.
    private var previousInBacklog = false
    /// The previous frame was not measured because it waited behind a large one.
    private var previousQueued = false

    /// Frames measured so far (those that fed the completion offset).
    package private(set) var framesMeasured = 0

    /// An estimator with no data: `target` is nil until the first delta frame was measured.
    package init() {}

    /// Milliseconds one byte of a frame adds to its delay (theta0): the inverse of the rate frames
    /// leave or cross the path at.
    package var millisecondsPerByte: Double { theta0 }
    /// Mean change of delay from one frame to the next that frame sizes do not explain (theta1),
    /// in milliseconds.
    package var deltaOffsetMilliseconds: Double { theta1 }
    /// The average delta frame's size in bytes (nil during the first five frames).
    package var averageFrameBytes: Double? { averageBytes }
    /// A large delta frame's size: the recent maximum, decaying by 0.5 % a frame, in bytes.
    package var largeFrameBytes: Double { largeBytes }
    /// How late an average frame completes after its baseline arrival, in milliseconds (nil
    /// before the first measurement).
    package var completionOffsetMilliseconds: Double? { level }
    /// Standard deviation of the size-corrected completion offset, in milliseconds.
    package var jitterMilliseconds: Double { levelVariance.squareRoot() }

    /// The delay after the baseline arrival that a large delta frame needs, in milliseconds; nil
    /// before the first measurement. Never negative.
    package var targetMilliseconds: Double? {
        guard let level else { return nil }
        let sizeTerm = theta0 * max(0, largeBytes - (averageBytes ?? largeBytes))
        return max(0, level + sizeTerm + noiseDeviations * levelVariance.squareRoot())
    }

    /// Forgets everything (a restarted sender, a new path).
    package mutating func reset() {
        let deviations = noiseDeviations
        self = VideoJitterEstimator()
        noiseDeviations = deviations
    }

    /// One complete frame: RTP `timestamp`, the arrival of its last packet `completedNs`, its
    /// size `bytes`, how late it completed after its baseline arrival (`offsetNs`, nil when the
    /// buffer has no baseline), whether it is a keyframe, and whether any of its packets came
    /// from a retransmission or was reordered (then it is not measured).
    package mutating func frameCompleted(
        timestamp: UInt32, completedNs: UInt64, bytes: Int, offsetNs: Double?, isKeyframe: Bool,
        repaired: Bool
    ) {
        guard bytes > 0 else { return }
        let size = Double(bytes)
        // Size statistics: keyframes stay out; a frame far above the average is a size outlier.
        var large = isKeyframe
        if let average = averageBytes {
            let deviation = bytesVariance.squareRoot()
            large = large || size > average + 3 * deviation
            if !isKeyframe {
                if size < average + 2 * deviation { averageBytes = 0.97 * average + 0.03 * size }
                let d = size - averageBytes!
                bytesVariance = max(1, 0.97 * bytesVariance + 0.03 * d * d)
            }
        } else if !isKeyframe {
            startupBytes += size
            startupFrames += 1
            if startupFrames == 5 { averageBytes = startupBytes / 5 }
        }
        if !large { largeBytes = max(0.995 * largeBytes, size) }

        // Queued behind a large frame: the previous frame (large, or itself in that backlog)
        // completed after this one's baseline arrival. Without a baseline, the frame right
        // after a large one is taken as queued.
        var queuedBehindLarge = false
        if previousInBacklog, let prev = previous {
            if let offsetNs {
                queuedBehindLarge = Double(prev.completedNs) > Double(completedNs) - offsetNs
            } else {
                queuedBehindLarge = !previousQueued
            }
        }
        let pairedWithQueued = previousQueued
        defer {
            previousInBacklog = large || queuedBehindLarge
            previousQueued = queuedBehindLarge
            previous = (timestamp, completedNs, size)
        }
        guard !repaired else { return }

        // The Kalman filter on consecutive frames.
        if let prev = previous {
            let mediaMs = Double(Int32(bitPattern: timestamp &- prev.timestamp)) / 90
            let arrivalMs = (Double(completedNs) - Double(prev.completedNs)) / 1e6
            // A pause or a jump of the sender's clock says nothing about the path.
            if mediaMs > 0 && mediaMs < 3_000 && abs(arrivalMs - mediaMs) < 3_000 && !queuedBehindLarge
                && !pairedWithQueued
            {
                let delayDelta = arrivalMs - mediaMs
                let sizeDelta = size - prev.bytes
                let sigma = deltaNoiseVariance.squareRoot()
                let deviation = delayDelta - (theta0 * sizeDelta + theta1)
                if abs(deviation) < 15 * sigma || large {
                    updateDeltaNoise(max(-5 * sigma, min(5 * sigma, deviation)))
                    kalmanUpdate(delayDelta: delayDelta, sizeDelta: sizeDelta)
                } else {
                    updateDeltaNoise(deviation > 0 ? 15 * sigma : -15 * sigma)
                }
            }
        }

        // The completion offset of an average frame and its jitter.
        guard let offsetNs, !large, !queuedBehindLarge else { return }
        let corrected = offsetNs / 1e6 - theta0 * (size - (averageBytes ?? size))
        levelSamples += 1
        framesMeasured += 1
        let gain = max(1 / levelSamples, 0.05)
        guard let current = level else {
            level = corrected
            return
        }
        let limit = 3 * levelVariance.squareRoot() + 1
        let e = max(-limit, min(limit, corrected - current))
        level = current + gain * e
        levelVariance = max(0.25, (1 - gain) * levelVariance + gain * e * e)
    }

    private mutating func updateDeltaNoise(_ deviation: Double) {
        let alpha = (deltaNoiseSamples - 1) / deltaNoiseSamples
        deltaNoiseSamples = min(deltaNoiseSamples + 1, 400)
        deltaNoiseVariance = max(1, alpha * deltaNoiseVariance + (1 - alpha) * deviation * deviation)
    }

    /// One predict-and-update step with the observation `delayDelta = theta0 x sizeDelta + theta1`.
    private mutating func kalmanUpdate(delayDelta: Double, sizeDelta: Double) {
        // Predict: the state does not move; its covariance grows by the process noise.
        p00 += q00
        p11 += q11
        let innovation = delayDelta - (theta0 * sizeDelta + theta1)
        let ph0 = p00 * sizeDelta + p01, ph1 = p10 * sizeDelta + p11
        // A small size change says little about the slope: its measurement noise is up to 301
        // times the jitter's deviation, a change as large as a large frame about 111 times.
        let scale = max(largeBytes, averageBytes ?? 0, 1)
        let measurementNoise = max(1, (300 * exp(-abs(sizeDelta) / scale) + 1) * deltaNoiseVariance.squareRoot())
        let s = sizeDelta * ph0 + ph1 + measurementNoise
        guard s > 1e-9 else { return }
        let k0 = ph0 / s, k1 = ph1 / s
        theta0 = max(1e-6, theta0 + k0 * innovation)
        theta1 += k1 * innovation
        let t00 = p00, t01 = p01
        p00 = (1 - k0 * sizeDelta) * t00 - k0 * p10
        p01 = (1 - k0 * sizeDelta) * t01 - k0 * p11
        p10 = p10 * (1 - k1) - k1 * sizeDelta * t00
        p11 = p11 * (1 - k1) - k1 * sizeDelta * t01
    }
}
