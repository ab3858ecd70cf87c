/// Pitch-synchronous time stretching of decoded PCM, in the manner of NetEq's Accelerate and
/// PreemptiveExpand: `accelerate` removes one pitch period (or, in a quiet block, one stretch of the
/// same length) from a block, `preemptiveExpand` repeats one. The period is the lag, between 2.5 ms
/// and 10 ms, at which the block best matches itself (normalised cross-correlation, searched on a
/// 4:1 decimated copy and refined at full rate); the removed or repeated period is cross-faded over
/// its whole length so the waveform stays continuous. A block is only changed when its correlation
/// at that lag is at least `correlationThreshold` or its level is below `quietLevel`; otherwise it is
/// left as it is and the call returns 0 (noisy, non-periodic loud audio would be audibly damaged).
///
/// Works on interleaved Int16 at the rate given at `init` (1 or 2 channels; the lag is found on
/// the channel mix and applied to every channel).
/// Thread rule: one thread (the audio thread of the stream that owns it). Cost: about 90 decimated
/// lags x 60 products plus 13 refined lags x 240 products (some 10^4 multiply-adds), and one pass
/// over the block; no allocation after `init`.
public final class AudioTimeStretch {
    /// Samples per second per channel.
    public let sampleRate: Int
    /// Interleaved channels (1 or 2).
    public let channels: Int
    /// Shortest period searched (2.5 ms: 400 Hz).
    public let minLag: Int
    /// Longest period searched (10 ms: 100 Hz).
    public let maxLag: Int
    /// Samples compared at each lag (5 ms).
    public let window: Int
    /// Normalised correlation at the chosen lag needed to stretch a loud block (NetEq uses 0.9).
    public var correlationThreshold: Double = 0.9
    /// RMS (Int16 full scale 32767) below which a block is stretched whatever its correlation.
    public var quietLevel: Double = 150
    /// Frames a block must hold: twice the longest lag (a period and the period after it).
    public var minimumBlock: Int { 2 * maxLag }

    private let mono: UnsafeMutableBufferPointer<Float>
    private let decimated: UnsafeMutableBufferPointer<Float>
    private let temp: UnsafeMutableBufferPointer<Int16>

    /// Creates the stretcher with its scratch buffers (a few kilobytes). Traps on channels other
    /// than 1 or 2 or a rate below 8 kHz.
    public init(sampleRate: Int = 48_000, channels: Int = 1) {
        precondition(channels == 1 || channels == 2)
        precondition(sampleRate >= 8_000)
        self.sampleRate = sampleRate
        self.channels = channels
        minLag = sampleRate / 400
        maxLag = sampleRate / 100
        window = sampleRate / 200
        mono = .allocate(capacity: 2 * maxLag + window)
        mono.initialize(repeating: 0)
        decimated = .allocate(capacity: (2 * maxLag + window) / 4 + 1)
        decimated.initialize(repeating: 0)
        temp = .allocate(capacity: maxLag * channels)
        temp.initialize(repeating: 0)
    }

    deinit { mono.deallocate(); decimated.deallocate(); temp.deallocate() }

    /// The lag chosen for a block, with its correlation and level. Thread rule: a value type.
    /// Cost: none.
    public struct Analysis: Sendable, Equatable {
        /// The period in frames.
        public var lag: Int
        /// Normalised correlation between the period at the start of the block and the one after.
        public var correlation: Double
        /// RMS of the analysed part (Int16 scale).
        public var rms: Double
        /// True when the rules allow stretching at this lag.
        public var stretchable: Bool
    }

    /// Finds the period of the first `frames` frames of `pcm` (interleaved). Needs at least
    /// `minimumBlock` frames; returns nil for a shorter block. No allocation.
    package func analyse(_ pcm: UnsafeBufferPointer<Int16>, frames: Int) -> Analysis? {
        guard frames >= minimumBlock, pcm.count >= frames * channels else { return nil }
        let span = min(frames, 2 * maxLag + window)
        var energy = 0.0
        if channels == 1 {
            for i in 0..<span { let v = Float(pcm[i]); mono[i] = v; energy += Double(v * v) }
        } else {
            for i in 0..<span {
                let v = (Float(pcm[2 * i]) + Float(pcm[2 * i + 1])) * 0.5
                mono[i] = v; energy += Double(v * v)
            }
        }
        let rms = (energy / Double(span)).squareRoot()
        // Coarse search on a 4:1 decimated copy (a 4-tap average is the anti-alias filter).
        let dn = span / 4
        for i in 0..<dn { decimated[i] = (mono[4 * i] + mono[4 * i + 1] + mono[4 * i + 2] + mono[4 * i + 3]) * 0.25 }
        let dw = window / 4
        var bestLag = minLag, bestScore = -Double.infinity
        var dl = minLag / 4
        while dl <= maxLag / 4 {
            // The compared windows: [0, dw) against [dl, dl + dw); the last lag may have less room.
            let w = min(dw, dn - dl)
            if w < dw / 2 { break }
            let c = normalised(decimated, 0, dl, w)
            if c > bestScore { bestScore = c; bestLag = dl * 4 }
            dl += 1
        }
        // Refine at full rate around the coarse lag.
        var lag = bestLag, corr = -Double.infinity
        for l in max(minLag, bestLag - 6)...min(maxLag, bestLag + 6) {
            let w = min(window, span - l)
            if w < window / 2 { continue }
            let c = normalised(mono, 0, l, w)
            if c > corr { corr = c; lag = l }
        }
        if !corr.isFinite { corr = 0 }
        let ok = (corr >= correlationThreshold) || rms < quietLevel
        return Analysis(lag: lag, correlation: corr, rms: rms, stretchable: ok)
    }

    @inline(__always)
    private func normalised(_ x: UnsafeMutableBufferPointer<Float>, _ a: Int, _ b: Int, _ n: Int) -> Double {
        var xy: Float = 0, xx: Float = 0, yy: Float = 0
        for i in 0..<n {
            let p = x[a + i], q = x[b + i]
            xy += p * q; xx += p * p; yy += q * q
        }
        let d = (Double(xx) * Double(yy)).squareRoot()
        return d > 0 ? Double(xy) / d : 0
    }

    /// Removes one period from the first `frames` frames of `pcm` (interleaved, in place): the
    /// first period is cross-faded into the second, the rest moves down. Returns the frames
    /// removed (0 when the block is too short or not stretchable). No allocation.
    package func accelerate(_ pcm: UnsafeMutableBufferPointer<Int16>, frames: Int) -> Int {
        guard let a = analyse(UnsafeBufferPointer(pcm), frames: frames), a.stretchable else { return 0 }
        let period = a.lag, ch = channels
        let p = pcm.baseAddress!
        let inv = 1.0 / Float(period)
        for i in 0..<period {
            let w = Float(i) * inv  // weight of the second period
            for c in 0..<ch {
                let x = Float(p[i * ch + c]), y = Float(p[(i + period) * ch + c])
                p[i * ch + c] = Int16(clamping: Int((x * (1 - w) + y * w).rounded()))
            }
        }
        let rest = frames - 2 * period
        if rest > 0 { (p + period * ch).update(from: p + 2 * period * ch, count: rest * ch) }
        return period
    }

    /// Repeats one period of the first `frames` frames of `pcm` (interleaved, in place; `pcm` must
    /// have room for `frames + maxLag` frames): after the first period comes one that fades from
    /// the second period into the first, then the second period and the rest. Returns the frames
    /// inserted (0 when the block is too short, not stretchable, or there is no room). No allocation.
    package func preemptiveExpand(_ pcm: UnsafeMutableBufferPointer<Int16>, frames: Int) -> Int {
        guard pcm.count >= (frames + maxLag) * channels,
            let a = analyse(UnsafeBufferPointer(pcm), frames: frames), a.stretchable
        else { return 0 }
        let period = a.lag, ch = channels
        let p = pcm.baseAddress!
        // Output: x[0 ..< period], then the inserted period fading from x[period + i] to x[i], then
        // x[period ..< frames] again.
        let t = temp.baseAddress!
        let inv = 1.0 / Float(period)
        for i in 0..<period {
            let w = Float(i) * inv  // weight of the first period
            for c in 0..<ch {
                let x = Float(p[(i + period) * ch + c]), y = Float(p[i * ch + c])
                t[i * ch + c] = Int16(clamping: Int((x * (1 - w) + y * w).rounded()))
            }
        }
        let rest = frames - period
        (p + 2 * period * ch).update(from: p + period * ch, count: rest * ch)  // memmove semantics
        (p + period * ch).update(from: t, count: period * ch)
        return period
    }
}

extension AudioTimeStretch {
    /// Finds the period of the first `frames` frames of `pcm` (interleaved). Needs at least
    /// `minimumBlock` frames; returns nil for a shorter block. No allocation.
    public func analyse(_ pcm: Span<Int16>, frames: Int) -> Analysis? {
        pcm.withUnsafeBufferPointer { analyse($0, frames: frames) }
    }

    /// Removes one period from the first `frames` frames of `pcm` in place; returns the frames
    /// removed (0 when the block is too short or not stretchable). No allocation.
    public func accelerate(_ pcm: inout MutableSpan<Int16>, frames: Int) -> Int {
        pcm.withUnsafeMutableBufferPointer { accelerate($0, frames: frames) }
    }

    /// Repeats one period of the first `frames` frames of `pcm` in place (`pcm` must have room for
    /// `frames + maxLag` frames); returns the frames inserted (0 when it cannot). No allocation.
    public func preemptiveExpand(_ pcm: inout MutableSpan<Int16>, frames: Int) -> Int {
        pcm.withUnsafeMutableBufferPointer { preemptiveExpand($0, frames: frames) }
    }
}
