/// Where a send pipeline puts finished packets (RTP, SRTP, RTCP): a UDP socket (`UDPPacketSink`),
/// memory for tests (`MemoryPacketSink`) or a capture file.
///
/// Contract: `write` consumes the bytes before it returns (the sink copies or sends them), so the
/// caller may reuse its buffer at once; it never throws and never blocks for long: failures are
/// counted by the sink, never reported to the pipeline. `flush` ends a group of packets (one
/// frame): batching sinks send what they hold.
///
/// Thread rule: `write` and `flush` are called from one pipeline thread at a time; a sink's
/// counters may be read from any thread. Cost: per sink (a copy into a preallocated slot for UDP).
public protocol PacketSink: AnyObject, Sendable {
    /// Hands over one packet; its bytes are consumed before the call returns.
    func write(_ packet: RawSpan)
    /// Sends (or records) everything written since the last flush.
    func flush()
}

extension PacketSink {
    /// The raw-buffer form of `write`, for the send paths inside the package.
    package func write(_ packet: UnsafeRawBufferPointer) { write(packet.bytes) }

    /// Writes every packet of `packets` in order (does not flush).
    package func write<S: Sequence>(contentsOf packets: S) where S.Element == UnsafeRawBufferPointer {
        for packet in packets { write(packet) }
    }

    /// Writes a packet held in an array (convenience for tests and control traffic; does not flush).
    public func write(_ packet: [UInt8]) {
        write(packet.span.bytes)
    }

    /// Writes `packets` in order and flushes: one frame's worth in one call (convenience for
    /// tests and control traffic; the arguments are arrays, so not for the per-frame path).
    public func send(_ packets: [UInt8]...) {
        for packet in packets { write(packet) }
        flush()
    }
}
