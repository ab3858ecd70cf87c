import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The counter must see real allocations (or the zero-allocation tests prove nothing) and must not
/// invent any.
@Suite struct AllocationCounterTests {
    final class Box { var value = 0 }

    @Test func countsSwiftObjectAndArrayAllocations() {
        var keep: [Box] = []
        keep.reserveCapacity(16)
        let n = AllocationCounter.count {
            for _ in 0..<10 { keep.append(Box()) }
        }
        #expect(n == 10)
        #expect(keep.count == 10)
    }

    @Test func countsMallocFromCCode() {
        let n = AllocationCounter.count {
            let p = malloc(100)
            let q = strdup("allocation counter")  // libc calling malloc through its own PLT
            free(p); free(q)
        }
        #expect(n >= 2)
    }

    @Test func countsNothingForPureArithmetic() {
        var x = 1
        let n = AllocationCounter.count {
            for i in 0..<1000 { x = x &* 31 &+ i }
        }
        #expect(n == 0)
        #expect(x != 1)
    }
}
