/// Lip sync between one audio and one video stream from the same sender, as libwebrtc's
/// `StreamSynchronization` does it: both streams' RTCP sender reports map RTP timestamps to the
/// sender's NTP clock (at capture time), so for the audio sample playing now and the video frame
/// shown last, "local play time minus capture time" can be compared. The difference is what one
/// stream must be delayed by to play in step with the other. The stream that is early gets an
/// extra delay (video: added to its playout time; audio: added to its jitter buffer's target,
/// reached by time-stretching), and the other's extra is taken back first.
///
/// What is filtered is the offset the streams would have with no extra delay (the measured offset
/// plus the extras in force), which does not move when a correction is made: filtering the
/// measured offset instead and adding a share of it at each update (an integrator behind a
/// lagging filter) kept adding after the offset was gone, and overshot a 150 ms difference by
/// 40-56 ms. Each update moves the extras half the way to that filtered offset, at most
/// `maxStepNs`: a stream reaches a new delay over a while (video by at most 100 ms per second,
/// audio by time-stretching), so the next measurement can still miss part of a correction already
/// made, and a full step would then overshoot by that part. A stream that took its delay more
/// slowly than `maxStepNs` a second would still make it overshoot by what it has not yet taken;
/// video's playout time moves by 100 ms a second, audio by a pitch period per 20 ms packet.
///
/// A dead band (`deadBandNs`, 30 ms, as libwebrtc's `StreamSynchronization` leaves offsets under
/// its minimum delta alone): while the filtered offset that remains with the extras in force is
/// smaller than that, nothing moves. An offset that small is not perceived (ITU-R BT.1359 puts
/// detectability at +45 ms audio early and -125 ms audio late), and delaying video to remove it
/// would add its whole amount to every frame's latency. Once a larger offset started a
/// correction, the steps go on until less than `settledNs` (2 ms) remains, so a corrected offset
/// ends near zero rather than just inside the band.
///
/// Thread rule: a value owned by the receive engine's thread. Cost: a few operations per update
/// (once a second).
package struct AudioVideoSync: Sendable {
    /// The largest change of either extra delay per update (libwebrtc: 80 ms).
    package var maxStepNs: Double = 80_000_000
    /// Remaining offsets smaller than this are left alone, in nanoseconds (libwebrtc: 30 ms).
    package var deadBandNs: Double = 30_000_000
    /// A correction under way stops when less than this remains, in nanoseconds.
    package var settledNs: Double = 2_000_000
    /// Whether a correction is under way (an offset beyond the dead band was seen and less than
    /// `settledNs` does not remain yet).
    package private(set) var isCorrecting = false
    /// The largest extra delay either stream is given.
    package var maxExtraNs: Double = 1_000_000_000
    /// Whether video can take an extra delay (it cannot when its frames are not scheduled for
    /// rendering). When it cannot, only an early audio stream is corrected.
    package var videoCanBeDelayed = true
    /// Extra delay for the video stream, in nanoseconds.
    package private(set) var videoExtraNs: Double = 0
    /// Extra delay for the audio stream, in nanoseconds.
    package private(set) var audioExtraNs: Double = 0
    /// The last measured offset: how much later (positive) or earlier audio plays than video,
    /// relative to their capture times, in nanoseconds. Nil before the first measurement.
    package private(set) var lastOffsetNs: Double?
    /// The filtered offset without extra delays (`videoExtraNs - audioExtraNs` that puts both in
    /// step). Nil before the first measurement.
    private var filteredNaturalOffsetNs: Double?

    package init() {}

    /// One measurement: the audio sample with capture time `audioCaptureNs` (sender clock) plays
    /// at `audioPlayNs` (local clock); the video frame captured at `videoCaptureNs` is shown at
    /// `videoRenderNs`. Moves the extra delays toward playing both in step.
    package mutating func update(audioPlayNs: Double, audioCaptureNs: Double, videoRenderNs: Double, videoCaptureNs: Double) {
        // Each stream's delay from capture to play, in (local - sender) clock units: the offset
        // between the clocks is the same for both and cancels in the difference.
        let offset = (audioPlayNs - audioCaptureNs) - (videoRenderNs - videoCaptureNs)
        lastOffsetNs = offset
        // Without the extras in force: video's extra made video later (less offset), audio's
        // made audio later.
        let natural = offset + videoExtraNs - audioExtraNs
        // Damped: half of each new measurement (one late pull or frame does not swing it).
        let filtered = filteredNaturalOffsetNs.map { $0 + (natural - $0) / 2 } ?? natural
        filteredNaturalOffsetNs = filtered
        let current = videoExtraNs - audioExtraNs
        // Within the dead band of where the extras already put the streams, and no correction
        // under way: leave them. A correction goes on until it has settled.
        // A correction has settled when neither the filtered offset nor this measurement is
        // further than `settledNs` from the extras in force: the filter lags a change, so after
        // one bad measurement its value alone passes the extras on its way back.
        let remaining = abs(max(-maxExtraNs, min(maxExtraNs, filtered)) - current)
        let remainingNow = abs(max(-maxExtraNs, min(maxExtraNs, natural)) - current)
        if isCorrecting ? max(remaining, remainingNow) < settledNs : remaining < deadBandNs {
            isCorrecting = false
            return
        }
        isCorrecting = true
        let wanted = current + (max(-maxExtraNs, min(maxExtraNs, filtered)) - current) / 2
        let videoTarget = videoCanBeDelayed ? max(0, wanted) : 0, audioTarget = max(0, -wanted)
        videoExtraNs += max(-maxStepNs, min(maxStepNs, videoTarget - videoExtraNs))
        audioExtraNs += max(-maxStepNs, min(maxStepNs, audioTarget - audioExtraNs))
    }
}
