import MediaCore
import Synchronization

/// A `PacketSink` that keeps copies of the last `capacity` packets in memory, for tests and tools.
/// When full, the oldest packet is dropped and counted.
///
/// Thread rule: `write`/`flush` from the pipeline thread; `packets`, `takePackets()` and the counters
/// from any thread (a mutex guards the state). Cost: one array allocation and copy per packet.
package final class MemoryPacketSink: PacketSink {
    private struct State {
        var ring: [[UInt8]] = []
        var head = 0  // index of the oldest packet once the ring is full
        var written = 0
        var dropped = 0
        var flushes = 0
        var flushedPackets = 0
    }

    /// Most packets kept.
    package let capacity: Int
    private let state = Mutex(State())

    /// Keeps at most `capacity` packets.
    package init(capacity: Int = 100_000) {
        precondition(capacity > 0, "a memory sink keeps at least one packet")
        self.capacity = capacity
    }

    /// Copies the packet.
    package func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            let copy = [UInt8](packet)
            state.withLock { s in
                s.written += 1
                if s.ring.count < capacity {
                    s.ring.append(copy)
                } else {
                    s.ring[s.head] = copy
                    s.head = (s.head + 1) % capacity
                    s.dropped += 1
                }
            }
        }
    }

    /// Counts the flush and marks every packet written so far as flushed.
    package func flush() {
        state.withLock { s in
            s.flushes += 1
            s.flushedPackets = s.written
        }
    }

    /// The kept packets, oldest first.
    package var packets: [[UInt8]] {
        state.withLock { s in Array(s.ring[s.head...] + s.ring[..<s.head]) }
    }

    /// Returns the kept packets (oldest first) and forgets them; counters stay.
    package func takePackets() -> [[UInt8]] {
        state.withLock { s in
            let out = Array(s.ring[s.head...] + s.ring[..<s.head])
            s.ring.removeAll(keepingCapacity: true)
            s.head = 0
            return out
        }
    }

    /// Packets written since creation.
    package var writtenCount: Int { state.withLock { $0.written } }
    /// Packets dropped because the sink was full (oldest first).
    package var droppedCount: Int { state.withLock { $0.dropped } }
    /// Calls to `flush()`.
    package var flushCount: Int { state.withLock { $0.flushes } }
    /// Packets written before the last `flush()`.
    package var flushedPacketCount: Int { state.withLock { $0.flushedPackets } }
}
