#if canImport(Glibc)
    import Glibc
#endif

/// Audio level measures on interleaved PCM: RMS relative to full scale, dBov, and the 7-bit
/// audio level of RFC 6464 section 3 (0 = 0 dBov, loudest; 127 = -127 dBov or quieter, i.e.
/// silence), computed as in RFC 6465 Appendix A and libwebrtc: RMS over the samples normalised so
/// that a full-scale square wave is 0 dBov (a full-scale sine is then -3 dBov).
///
/// Each measure reads a `Span`; a raw-buffer form of each serves the package's own paths.
/// Thread rule: pure functions on caller memory, any thread. Cost: one pass, no allocation.
public enum AudioLevel {
    /// The RFC 6464 level of digital silence (and anything at or below -127 dBov).
    public static let silence: UInt8 = 127

    /// Root mean square of Int16 samples, as a fraction of full scale (32768); 0 for no samples.
    package static func rms(_ samples: UnsafeBufferPointer<Int16>) -> Double {
        guard !samples.isEmpty else { return 0 }
        var sum: Int64 = 0
        for sample in samples { let s = Int64(sample); sum &+= s * s }
        return (Double(sum) / Double(samples.count)).squareRoot() / 32768
    }

    /// Root mean square of Float samples (full scale = 1.0); 0 for no samples.
    /// Squares are summed 8 lanes wide in Float over blocks of at most 512 samples, each block's
    /// sum added in Double (a 20 ms frame costs about a sixth of a scalar Double loop; relative
    /// error stays near Float's 1e-7 whatever the length).
    package static func rms(_ samples: UnsafeBufferPointer<Float>) -> Double {
        guard let base = samples.baseAddress, !samples.isEmpty else { return 0 }
        let n = samples.count, vectorEnd = n & ~7
        let raw = UnsafeRawPointer(base)
        var sum = 0.0
        var i = 0
        while i < vectorEnd {
            let blockEnd = min(vectorEnd, i + 512)
            var acc = SIMD8<Float>()
            while i < blockEnd {
                let v = raw.loadUnaligned(fromByteOffset: i * MemoryLayout<Float>.stride, as: SIMD8<Float>.self)
                acc += v * v  // not addProduct: without FMA in the target it calls fmaf per lane
                i += 8
            }
            sum += Double(acc.sum())
        }
        while i < n { let s = Double(base[i]); sum += s * s; i += 1 }
        return (sum / Double(n)).squareRoot()
    }

    /// Level in dBov for an RMS relative to full scale: `20 log10(rms)`; -infinity for 0.
    public static func dBov(rms: Double) -> Double {
        rms > 0 ? 20 * log10(rms) : -.infinity
    }

    /// Level in dBov of Int16 samples.
    package static func dBov(_ samples: UnsafeBufferPointer<Int16>) -> Double { dBov(rms: rms(samples)) }

    /// Level in dBov of Float samples.
    package static func dBov(_ samples: UnsafeBufferPointer<Float>) -> Double { dBov(rms: rms(samples)) }

    /// The RFC 6464 value for a level in dBov: `-dBov` rounded, clamped to 0...127 (127 = silence).
    public static func rfc6464Level(dBov: Double) -> UInt8 {
        guard dBov.isFinite else { return dBov > 0 ? 0 : silence }
        let value = (-dBov).rounded()
        return value <= 0 ? 0 : (value >= 127 ? silence : UInt8(value))
    }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Int16 samples.
    package static func rfc6464Level(_ samples: UnsafeBufferPointer<Int16>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Float samples.
    package static func rfc6464Level(_ samples: UnsafeBufferPointer<Float>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }
}

// MARK: Spans

extension AudioLevel {
    /// Root mean square of Int16 samples, as a fraction of full scale (32768); 0 for no samples.
    public static func rms(_ samples: Span<Int16>) -> Double { samples.withUnsafeBufferPointer { rms($0) } }

    /// Root mean square of Float samples (full scale = 1.0); 0 for no samples.
    public static func rms(_ samples: Span<Float>) -> Double { samples.withUnsafeBufferPointer { rms($0) } }

    /// Level in dBov of Int16 samples (-infinity for silence).
    public static func dBov(_ samples: Span<Int16>) -> Double { dBov(rms: rms(samples)) }

    /// Level in dBov of Float samples (-infinity for silence).
    public static func dBov(_ samples: Span<Float>) -> Double { dBov(rms: rms(samples)) }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Int16 samples.
    public static func rfc6464Level(_ samples: Span<Int16>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Float samples.
    public static func rfc6464Level(_ samples: Span<Float>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }
}
