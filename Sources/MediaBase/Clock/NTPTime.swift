#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A 64-bit NTP timestamp (RFC 5905 §6: 32.32 fixed-point seconds since 1900-01-01), as carried in
/// RTCP sender reports (RFC 3550 §4, §6.4.1), plus the "middle 32 bits" used by LSR/DLSR.
/// Thread rule: a value type. Cost: O(1).
public struct NTPTime: RawRepresentable, Sendable, Hashable, Comparable {
    /// Seconds in the upper 32 bits, fraction in the lower 32.
    public var rawValue: UInt64
    /// Makes a timestamp from its 64-bit wire value.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Seconds from 1900-01-01 (NTP era 0) to 1970-01-01 (Unix epoch).
    public static let unixEpochOffset: UInt64 = 2_208_988_800

    /// The NTP time of a Unix-epoch time in nanoseconds (wall clock, e.g. `clock_gettime(CLOCK_REALTIME)`).
    public init(unixNanoseconds ns: UInt64) {
        let s = ns / 1_000_000_000 + Self.unixEpochOffset
        let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000
        rawValue = s << 32 | frac
    }

    /// The wall clock (`CLOCK_REALTIME`) now, as an NTP timestamp. Cost: one `clock_gettime`.
    public static func wallClock() -> NTPTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return NTPTime(unixNanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }

    /// Back to Unix-epoch nanoseconds (truncating to the nanosecond).
    public var unixNanoseconds: UInt64 {
        let s = (rawValue >> 32) &- Self.unixEpochOffset
        return s &* 1_000_000_000 &+ ((rawValue & 0xFFFF_FFFF) * 1_000_000_000) >> 32
    }

    /// RFC 3550 §6.4.1 "LSR": the middle 32 bits (16.16 seconds) of this timestamp.
    public var middle32: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 16) }

    /// Ordered by raw value.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// RFC 3550 §6.4.1 round-trip time from a receiver report block, seen by the sender of the
    /// SR: `A - LSR - DLSR` in 1/65536 s, where A is the report's arrival time. Returns seconds,
    /// or nil when LSR is 0 (no SR received yet) or the result is negative (clock skew or a
    /// bogus report).
    public static func roundTripTime(
        arrival: NTPTime, lastSenderReport lsr: UInt32,
        delaySinceLastSenderReport dlsr: UInt32
    ) -> Double? {
        guard lsr != 0 else { return nil }
        let a = arrival.middle32
        let rtt = a &- lsr &- dlsr  // modular arithmetic over 16.16 seconds
        guard rtt < 0x8000_0000 else { return nil }
        return Double(rtt) / 65_536.0
    }

    /// RFC 3550 §6.4.1 "DLSR": the delay between receiving the last SR and sending a report, in
    /// units of 1/65536 s (saturating at 2^32 - 1).
    public static func delaySinceLastSenderReport(nanoseconds: UInt64) -> UInt32 {
        let units = nanoseconds / 1_000_000_000 * 65_536 + (nanoseconds % 1_000_000_000) * 65_536 / 1_000_000_000
        return UInt32(clamping: units)
    }
}
