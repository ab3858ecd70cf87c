/// Lip sync between one audio and one video stream from the same sender, as libwebrtc's
/// `StreamSynchronization` does it: both streams' RTCP sender reports map RTP timestamps to the
/// sender's NTP clock (at capture time), so for the audio sample playing now and the video frame
/// shown last, "local play time minus capture time" can be compared. The difference is what one
/// stream must be delayed by to play in step with the other. The stream that is early gets an
/// extra delay (video: added to its playout time; audio: added to its jitter buffer's target,
/// reached by time-stretching), the other's extra is taken back first, and each update moves the
/// extras by half the (damped) offset and at most `maxStepNs`, so a correction is never heard or
/// seen as a jump and does not overshoot.
///
/// Thread rule: a value owned by the receive engine's thread. Cost: a few operations per update
/// (once a second).
package struct AudioVideoSync: Sendable {
    /// The largest change of either extra delay per update (libwebrtc: 80 ms).
    package var maxStepNs: Double = 80_000_000
    /// The largest extra delay either stream is given.
    package var maxExtraNs: Double = 1_000_000_000
    /// Extra delay for the video stream, in nanoseconds.
    package private(set) var videoExtraNs: Double = 0
    /// Extra delay for the audio stream, in nanoseconds.
    package private(set) var audioExtraNs: Double = 0
    /// The last measured offset: how much later (positive) or earlier audio plays than video,
    /// relative to their capture times, in nanoseconds. Nil before the first measurement.
    package private(set) var lastOffsetNs: Double?
    private var filteredOffsetNs: Double?

    package init() {}

    /// One measurement: the audio sample with capture time `audioCaptureNs` (sender clock) plays
    /// at `audioPlayNs` (local clock); the video frame captured at `videoCaptureNs` is shown at
    /// `videoRenderNs`. Moves the extra delays toward playing both in step.
    package mutating func update(audioPlayNs: Double, audioCaptureNs: Double, videoRenderNs: Double, videoCaptureNs: Double) {
        // Each stream's delay from capture to play, in (local - sender) clock units: the offset
        // between the clocks is the same for both and cancels in the difference.
        let offset = (audioPlayNs - audioCaptureNs) - (videoRenderNs - videoCaptureNs)
        lastOffsetNs = offset
        // Damped: half of each new measurement (one late pull or frame does not swing it).
        let filtered = filteredOffsetNs.map { $0 + (offset - $0) / 2 } ?? offset
        filteredOffsetNs = filtered
        // The relative extra (video minus audio) that would put both in step, approached by half
        // the measured offset per update, as libwebrtc does: a stream's buffer grows to a new
        // delay over a while (audio by time-stretching), so the offset measured next still shows
        // part of a correction already made, and taking all of it would overshoot.
        let wanted = max(-maxExtraNs, min(maxExtraNs, videoExtraNs - audioExtraNs + filtered / 2))
        let videoTarget = max(0, wanted), audioTarget = max(0, -wanted)
        videoExtraNs += max(-maxStepNs, min(maxStepNs, videoTarget - videoExtraNs))
        audioExtraNs += max(-maxStepNs, min(maxStepNs, audioTarget - audioExtraNs))
    }
}
