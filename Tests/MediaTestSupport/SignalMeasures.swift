// Signal measures shared by the codec tests (MediaCoreTests) and the pipeline tests
// (MediaRealtimeTests).
import MediaCore

/// Channel `channel` of interleaved `samples`.
package func audioChannel(_ samples: [Float], channel: Int, of channels: Int) -> [Float] {
    stride(from: channel, to: samples.count, by: channels).map { samples[$0] }
}

/// Zero crossings (sign changes) of a mono signal.
package func audioZeroCrossings(_ signal: ArraySlice<Float>) -> Int {
    var count = 0
    var previous = signal.first ?? 0
    for value in signal.dropFirst() {
        if (previous < 0 && value >= 0) || (previous >= 0 && value < 0) { count += 1 }
        previous = value
    }
    return count
}

/// RMS of a Float slice (full scale 1.0).
package func audioRMS(_ signal: ArraySlice<Float>) -> Double {
    Array(signal).withUnsafeBufferPointer { AudioLevel.rms($0) }
}

/// A copy of the samples an `AudioSink` was lent.
package func copied(_ samples: Span<Int16>) -> [Int16] {
    samples.withUnsafeBufferPointer { Array($0) }
}
