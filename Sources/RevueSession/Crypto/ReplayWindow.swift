/// Sliding anti-replay window over 64-bit packet counters (RFC 6479's bitmap idea, as WireGuard
/// uses it): accepts each counter at most once and rejects anything older than `size` behind the
/// highest counter seen. O(1) per packet, no allocation after init.
package struct ReplayWindow {
    /// How far behind the highest counter a packet may still arrive (reordering tolerance).
    package static let size: UInt64 = 2048
    private var bits = [UInt64](repeating: 0, count: Int(size / 64))

    /// An empty window.
    package init() {}
    package private(set) var highest: UInt64 = 0
    private var any = false

    /// Whether `counter` would be accepted; does not record it (call after authentication with
    /// `record`, so a forged packet cannot move the window).
    package func wouldAccept(_ counter: UInt64) -> Bool {
        if !any || counter > highest { return true }
        if highest - counter >= Self.size { return false }
        let i = Int(counter % Self.size)
        return bits[i / 64] & (1 << UInt64(i % 64)) == 0
    }

    /// Marks `counter` as seen. Precondition: `wouldAccept(counter)`.
    package mutating func record(_ counter: UInt64) {
        if !any || counter > highest {
            // Clear the slots between the old highest and the new one.
            let start = any ? highest + 1 : counter
            if counter - start >= Self.size {
                for w in bits.indices { bits[w] = 0 }
            } else if start <= counter {
                var c = start
                while c <= counter {
                    let i = Int(c % Self.size)
                    bits[i / 64] &= ~(1 << UInt64(i % 64))
                    c += 1
                }
            }
            highest = counter
            any = true
        }
        let i = Int(counter % Self.size)
        bits[i / 64] |= 1 << UInt64(i % 64)
    }
}
