internal import CMediaShims

/// Speech clean-up before encoding (speexdsp `SpeexPreprocessState`): noise suppression,
/// automatic gain control and a voice activity flag, applied in place to fixed-size mono Int16
/// frames (one processor per channel).
///
/// The VAD of speexdsp 1.2 is crude: a threshold (`vadStartPercent`/`vadContinuePercent`) on the
/// preprocessor's speech probability, which sits near 50 % for plain noise, so with the default
/// thresholds nearly every frame counts as speech (speexdsp also prints "The VAD has been replaced
/// by a hack" to stderr when it is enabled). Revue's speaking detection comes from audio levels
/// instead; treat `Result.isSpeech` as a hint. Output lags input by `latency` (one frame: the
/// overlap-add of speexdsp's analysis window). Thread rule: one thread at a time (not `Sendable`).
/// Cost: one FFT analysis and synthesis per frame; `process` never allocates.
public final class AudioProcessor {
    /// What `process` reports about a frame.
    public struct Result: Sendable, Hashable {
        /// The preprocessor's voice activity decision; only meaningful while `isVADEnabled`.
        public var isSpeech: Bool
        /// speexdsp's speech probability for the frame, 0...1 (`SPEEX_PREPROCESS_GET_PROB`).
        public var speechProbability: Double
    }

    /// Samples per frame (10-20 ms is what speexdsp is tuned for).
    public let frameSize: Int
    /// Sample rate in Hz.
    public let sampleRate: Int

    private let state: OpaquePointer

    /// Creates a processor for mono frames of `frameSize` samples at `sampleRate` Hz. Speexdsp
    /// starts with denoise on, AGC and VAD off. Throws `SpeexError.allocationFailed` when it
    /// cannot be created; non-positive sizes trap.
    public init(frameSize: Int, sampleRate: Int) throws(SpeexError) {
        precondition(
            frameSize > 0 && sampleRate > 0, "AudioProcessor frameSize \(frameSize) / sampleRate \(sampleRate) must be positive")
        guard let state = speex_preprocess_state_init(Int32(frameSize), Int32(sampleRate)) else {
            throw SpeexError.allocationFailed
        }
        self.state = state
        self.frameSize = frameSize
        self.sampleRate = sampleRate
    }

    deinit { speex_preprocess_state_destroy(state) }

    /// Processes one frame in place (`speex_preprocess_run`); `frame.count` must equal `frameSize`
    /// (traps otherwise). Returns the VAD flag and speech probability.
    @discardableResult
    package func process(_ frame: UnsafeMutableBufferPointer<Int16>) -> Result {
        precondition(frame.count == frameSize, "AudioProcessor frame of \(frame.count) samples, expected \(frameSize)")
        let vad = speex_preprocess_run(state, frame.baseAddress!)
        return Result(isSpeech: vad != 0, speechProbability: Double(getInt(SPEEX_PREPROCESS_GET_PROB)) / 100)
    }

    /// Delay of the output behind the input, in samples: one frame (speexdsp synthesises the
    /// previous frame by overlap-add while analysing the current one).
    public var latency: Int { frameSize }

    // MARK: Settings

    /// Noise suppression (`SPEEX_PREPROCESS_SET_DENOISE`). Default true.
    public var isDenoiseEnabled: Bool {
        get { getInt(SPEEX_PREPROCESS_GET_DENOISE) != 0 }
        set { setInt(SPEEX_PREPROCESS_SET_DENOISE, newValue ? 1 : 0) }
    }

    /// Maximum noise attenuation in dB, a negative number (`SPEEX_PREPROCESS_SET_NOISE_SUPPRESS`).
    /// Default -15. Positive values trap.
    public var noiseSuppressionDecibels: Int {
        get { Int(getInt(SPEEX_PREPROCESS_GET_NOISE_SUPPRESS)) }
        set {
            precondition(newValue <= 0, "noise suppression is an attenuation in dB (<= 0), not \(newValue)")
            setInt(SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, Int32(newValue))
        }
    }

    /// Automatic gain control (`SPEEX_PREPROCESS_SET_AGC`). Default false.
    public var isAGCEnabled: Bool {
        get { getInt(SPEEX_PREPROCESS_GET_AGC) != 0 }
        set { setInt(SPEEX_PREPROCESS_SET_AGC, newValue ? 1 : 0) }
    }

    /// The loudness AGC steers towards, in Int16 sample units 1...32768
    /// (`SPEEX_PREPROCESS_SET_AGC_LEVEL`). Default 8000.
    public var agcLevel: Float {
        get {
            var value: Float = 0
            _ = cms_speex_preprocess_get_float(state, SPEEX_PREPROCESS_GET_AGC_LEVEL, &value)
            return value
        }
        set {
            precondition(newValue >= 1 && newValue <= 32768, "AGC level \(newValue) outside 1...32768")
            let status = cms_speex_preprocess_set_float(state, SPEEX_PREPROCESS_SET_AGC_LEVEL, newValue)
            precondition(status == 0, "speex_preprocess_ctl SET_AGC_LEVEL failed")
        }
    }

    /// The most AGC may amplify, in dB (`SPEEX_PREPROCESS_SET_AGC_MAX_GAIN`). Default 30.
    public var agcMaxGainDecibels: Int {
        get { Int(getInt(SPEEX_PREPROCESS_GET_AGC_MAX_GAIN)) }
        set {
            precondition(newValue >= 0, "AGC max gain \(newValue) dB must be >= 0")
            setInt(SPEEX_PREPROCESS_SET_AGC_MAX_GAIN, Int32(newValue))
        }
    }

    /// The gain AGC currently applies, in dB (`SPEEX_PREPROCESS_GET_AGC_GAIN`).
    public var agcGainDecibels: Int { Int(getInt(SPEEX_PREPROCESS_GET_AGC_GAIN)) }

    /// Voice activity detection (`SPEEX_PREPROCESS_SET_VAD`): makes `Result.isSpeech` meaningful.
    /// Crude in speexdsp 1.2 (see the type's note). Default false.
    public var isVADEnabled: Bool {
        get { getInt(SPEEX_PREPROCESS_GET_VAD) != 0 }
        set { setInt(SPEEX_PREPROCESS_SET_VAD, newValue ? 1 : 0) }
    }

    /// Speech probability (percent, 0...100) needed to go from silence to speech
    /// (`SPEEX_PREPROCESS_SET_PROB_START`). Default 35.
    public var vadStartPercent: Int {
        get { Int(getInt(SPEEX_PREPROCESS_GET_PROB_START)) }
        set {
            precondition((0...100).contains(newValue), "VAD start probability \(newValue) outside 0...100")
            setInt(SPEEX_PREPROCESS_SET_PROB_START, Int32(newValue))
        }
    }

    /// Speech probability (percent, 0...100) needed to stay in speech
    /// (`SPEEX_PREPROCESS_SET_PROB_CONTINUE`). Default 20.
    public var vadContinuePercent: Int {
        get { Int(getInt(SPEEX_PREPROCESS_GET_PROB_CONTINUE)) }
        set {
            precondition((0...100).contains(newValue), "VAD continue probability \(newValue) outside 0...100")
            setInt(SPEEX_PREPROCESS_SET_PROB_CONTINUE, Int32(newValue))
        }
    }

    // MARK: ctl plumbing

    private func getInt(_ request: Int32) -> Int32 {
        var value: Int32 = 0
        let status = cms_speex_preprocess_get_int(state, request, &value)
        precondition(status == 0, "speex_preprocess_ctl(\(request)) failed")
        return value
    }

    private func setInt(_ request: Int32, _ value: Int32) {
        let status = cms_speex_preprocess_set_int(state, request, value)
        precondition(status == 0, "speex_preprocess_ctl(\(request), \(value)) failed")
    }
}

extension AudioProcessor {
    /// Processes one frame in place (`speex_preprocess_run`); `frame.count` must equal
    /// `frameSize` (traps otherwise). Returns the VAD flag and speech probability.
    @discardableResult
    public func process(_ frame: inout MutableSpan<Int16>) -> Result {
        frame.withUnsafeMutableBufferPointer { process($0) }
    }
}
