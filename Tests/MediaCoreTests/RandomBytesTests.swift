import MediaCore
import Testing

@Suite struct RandomBytesTests {
    @Test func bytesHaveTheRequestedCountAndDifferBetweenCalls() {
        #expect(RandomBytes.bytes(0).isEmpty)
        let a = RandomBytes.bytes(32)
        let b = RandomBytes.bytes(32)
        #expect(a.count == 32)
        #expect(a != b, "two 256-bit draws collide with probability 2^-256")
    }

    @Test func byteValuesAreUniform() {
        // Chi-squared over 256 bins with 262144 samples (1024 expected per bin), 255 degrees of
        // freedom: a true uniform source exceeds 400 with probability below 1e-8.
        let samples = RandomBytes.bytes(1 << 18)
        var counts = [Int](repeating: 0, count: 256)
        for byte in samples { counts[Int(byte)] += 1 }
        let expected = Double(samples.count) / 256
        let chiSquared = counts.reduce(0.0) { $0 + (Double($1) - expected) * (Double($1) - expected) / expected }
        #expect(chiSquared < 400, "chi-squared \(chiSquared)")
    }

    @Test func fillWritesTheWholeBuffer() {
        var bytes = [UInt8](repeating: 0, count: 4096)
        RandomBytes.fill(&bytes)
        // About 16 zero bytes are expected; far more would mean part of the buffer was skipped.
        #expect(bytes.filter { $0 == 0 }.count < 64)
        #expect(bytes[4000...].contains { $0 != 0 })

        var raw = [UInt8](repeating: 0, count: 64)
        raw.withUnsafeMutableBytes { RandomBytes.fill(UnsafeMutableRawBufferPointer(rebasing: $0[8..<16])) }
        #expect(raw[..<8].allSatisfy { $0 == 0 } && raw[16...].allSatisfy { $0 == 0 }, "only the slice is written")
        #expect(raw[8..<16].contains { $0 != 0 })
        RandomBytes.fill(UnsafeMutableRawBufferPointer(start: nil, count: 0))
    }

    @Test func integersUseEveryBit() {
        var or32: UInt32 = 0, and32: UInt32 = .max
        var or64: UInt64 = 0, and64: UInt64 = .max
        for _ in 0..<200 {
            let a = RandomBytes.uint32(), b = RandomBytes.uint64()
            or32 |= a; and32 &= a
            or64 |= b; and64 &= b
        }
        // Each bit stays 0 (or 1) through 200 draws with probability 2^-200.
        #expect(or32 == .max && and32 == 0)
        #expect(or64 == .max && and64 == 0)
    }

    @Test func uniformStaysBelowItsBoundAndReachesEveryValue() {
        var seen = Set<UInt32>()
        for _ in 0..<5000 {
            let v = RandomBytes.uniform(10)
            #expect(v < 10)
            seen.insert(v)
        }
        #expect(seen.count == 10)
        #expect(RandomBytes.uniform(1) == 0)
    }

    @Test func initialSequenceNumbersStayInTheLowerHalf() {
        var maximum: UInt16 = 0
        for _ in 0..<2000 {
            let s = RandomBytes.initialSequenceNumber()
            #expect(s < 0x8000)
            maximum = max(maximum, s)
        }
        #expect(maximum > 0x7000, "the whole lower half is used")
    }

    @Test func secureGeneratorDrivesStandardLibraryRandomAPIs() {
        var generator = SecureRandomNumberGenerator()
        var seen = Set<Int>()
        for _ in 0..<1000 {
            let v = Int.random(in: 1...6, using: &generator)
            #expect((1...6).contains(v))
            seen.insert(v)
        }
        #expect(seen.count == 6)
        let shuffled = Array(0..<64).shuffled(using: &generator)
        #expect(shuffled.sorted() == Array(0..<64))
        #expect(shuffled != Array(0..<64))
    }
}
