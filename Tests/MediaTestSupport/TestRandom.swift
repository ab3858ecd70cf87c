/// A deterministic SplitMix64 generator for reproducible test randomness (chunk sizes, garbage and
/// corrupted bytes, noise): the same `state` gives the same sequence on every run.
package struct TestRandom: RandomNumberGenerator {
    /// The generator's state; the seed.
    package var state: UInt64

    /// A generator seeded with `state`.
    package init(state: UInt64) { self.state = state }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in 0..<`n` (`n` > 0), with the slight modulo bias tests can bear.
    package mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
