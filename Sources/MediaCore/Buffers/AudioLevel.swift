#if canImport(Glibc)
import Glibc
#endif

/// Audio level measures on interleaved PCM: RMS relative to full scale, dBov, and the 7-bit
/// audio level of RFC 6464 section 3 (0 = 0 dBov, loudest; 127 = -127 dBov or quieter, i.e.
/// silence), computed as in RFC 6465 Appendix A and libwebrtc: RMS over the samples normalised so
/// that a full-scale square wave is 0 dBov (a full-scale sine is then -3 dBov).
///
/// Thread rule: pure functions on caller memory, any thread. Cost: one pass, no allocation.
public enum AudioLevel {
    /// The RFC 6464 level of digital silence (and anything at or below -127 dBov).
    public static let silence: UInt8 = 127

    /// Root mean square of Int16 samples, as a fraction of full scale (32768); 0 for no samples.
    public static func rms(_ samples: UnsafeBufferPointer<Int16>) -> Double {
        guard !samples.isEmpty else { return 0 }
        var sum: Int64 = 0
        for sample in samples { let s = Int64(sample); sum &+= s * s }
        return (Double(sum) / Double(samples.count)).squareRoot() / 32768
    }

    /// Root mean square of Float samples (full scale = 1.0); 0 for no samples.
    public static func rms(_ samples: UnsafeBufferPointer<Float>) -> Double {
        guard !samples.isEmpty else { return 0 }
        var sum = 0.0
        for sample in samples { let s = Double(sample); sum += s * s }
        return (sum / Double(samples.count)).squareRoot()
    }

    /// Level in dBov for an RMS relative to full scale: `20 log10(rms)`; -infinity for 0.
    public static func dBov(rms: Double) -> Double {
        rms > 0 ? 20 * log10(rms) : -.infinity
    }

    /// Level in dBov of Int16 samples.
    public static func dBov(_ samples: UnsafeBufferPointer<Int16>) -> Double { dBov(rms: rms(samples)) }

    /// Level in dBov of Float samples.
    public static func dBov(_ samples: UnsafeBufferPointer<Float>) -> Double { dBov(rms: rms(samples)) }

    /// The RFC 6464 value for a level in dBov: `-dBov` rounded, clamped to 0...127 (127 = silence).
    public static func rfc6464Level(dBov: Double) -> UInt8 {
        guard dBov.isFinite else { return dBov > 0 ? 0 : silence }
        let value = (-dBov).rounded()
        return value <= 0 ? 0 : (value >= 127 ? silence : UInt8(value))
    }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Int16 samples.
    public static func rfc6464Level(_ samples: UnsafeBufferPointer<Int16>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }

    /// The RFC 6464 level (0 loudest ... 127 silence) of Float samples.
    public static func rfc6464Level(_ samples: UnsafeBufferPointer<Float>) -> UInt8 { rfc6464Level(dBov: dBov(samples)) }
}
