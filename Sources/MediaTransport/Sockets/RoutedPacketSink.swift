/// A `PacketSink` that sends one stream to several receivers (a mesh call's legs, each with its own
/// SRTP key) and can resend a packet to one of them only: a generic NACK (RFC 4585 §6.2.1) comes
/// from one receiver, and the others already have the packet (their SRTP replay window would drop
/// it anyway, RFC 3711 §3.3.2).
///
/// Thread rule: as `PacketSink` (`write(_:route:)` on the pipeline thread, like `write`).
/// Cost: as `write`, for one receiver.
public protocol RoutedPacketSink: PacketSink {
    /// Sends `packet` to the receiver identified by `route` only (a value the caller gave the
    /// stream with `handleNack(_:route:)`); an unknown route drops the packet. Bytes are consumed
    /// before the call returns.
    func write(_ packet: RawSpan, route: Int)
}

extension RoutedPacketSink {
    /// The raw-buffer form of `write(_:route:)`, for the send paths inside the package.
    package func write(_ packet: UnsafeRawBufferPointer, route: Int) { write(packet.bytes, route: route) }
}
