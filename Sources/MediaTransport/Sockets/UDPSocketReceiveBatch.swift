internal import CMediaShims
import Glibc
import MediaBase

/// One received datagram, borrowed from a `UDPReceiveBatch`: valid until the batch receives again.
/// Thread rule: use on the receiving thread, during the handler call. Cost: none (a view).
public struct UDPDatagram {
    /// The datagram's bytes (clipped to the batch's buffer size when truncated); the engine's
    /// view, valid while the batch holds it. Users read them through `withBytes(_:)`.
    package let bytes: UnsafeRawBufferPointer
    /// Who sent it; nil only for an address family other than IPv4/IPv6.
    public let source: SocketAddress?
    /// When it reached the socket: the kernel's receive timestamp (`SO_TIMESTAMPNS`) mapped onto
    /// the monotonic clock, or, when the kernel gave none, when its batch was read; never earlier
    /// than the datagram the batch gave before it.
    public let receivedAt: MonotonicTime
    /// True when the datagram was longer than the buffer (`MSG_TRUNC`); the bytes hold its start.
    public let isTruncated: Bool
    /// The message header it came with (for `destination`), valid as long as the bytes.
    let header: UnsafePointer<msghdr>?

    /// A datagram not read from a socket (tests, simulations): no message header.
    package init(bytes: UnsafeRawBufferPointer, source: SocketAddress?, receivedAt: MonotonicTime, isTruncated: Bool) {
        self.init(bytes: bytes, source: source, receivedAt: receivedAt, isTruncated: isTruncated, header: nil)
    }

    init(
        bytes: UnsafeRawBufferPointer, source: SocketAddress?, receivedAt: MonotonicTime, isTruncated: Bool,
        header: UnsafePointer<msghdr>?
    ) {
        self.bytes = bytes
        self.source = source
        self.receivedAt = receivedAt
        self.isTruncated = isTruncated
        self.header = header
    }

    /// The datagram's length in bytes (clipped to the batch's buffer size when truncated).
    public var byteCount: Int { bytes.count }

    /// Lends the datagram's bytes (clipped to the batch's buffer size when truncated) to `body`;
    /// the span cannot outlive the call. Cost: none (no copy).
    public func withBytes<R, E: Error>(_ body: (RawSpan) throws(E) -> R) throws(E) -> R { try body(bytes.bytes) }

    /// The local address it arrived at (port 0), when its socket was opened with
    /// `UDPSocket.Options.receiveDestinations`; nil otherwise. Read on demand (a walk over the
    /// message's control data), so the media path that never asks pays nothing. Valid during the
    /// handler call, as the bytes are.
    public var destination: SocketAddress? {
        guard let header else { return nil }
        var storage = sockaddr_storage()
        guard cms_message_destination(header, &storage) == 1 else { return nil }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
    }
}

/// A preallocated ring of `capacity` receive buffers of `bufferSize` bytes each, filled by one
/// `recvmmsg(2)`. Datagrams are read in place through `self[i]` until the next `receive(from:wait:)`.
///
/// Each datagram carries the kernel's receive time (`SO_TIMESTAMPNS`, turned on when a
/// `UDPSocket` is opened), so a receiving thread that was descheduled does not make packets look
/// delayed to jitter and delay-based estimates.
///
/// Thread rule: one thread at a time. Cost: one system call per batch (and two clock reads), no
/// allocation.
public final class UDPReceiveBatch {
    /// Datagrams one call can return.
    public let capacity: Int
    /// Bytes per receive buffer; longer datagrams are truncated and flagged.
    public let bufferSize: Int
    /// Datagrams from the last receive.
    public private(set) var count = 0
    /// When the last batch returned.
    public private(set) var receivedAt = MonotonicTime.zero

    private let storage: UnsafeMutableRawPointer
    private let headers: UnsafeMutablePointer<cms_mmsghdr>
    private let vectors: UnsafeMutablePointer<iovec>
    private let addresses: UnsafeMutablePointer<sockaddr_storage>
    /// Per message, room for its receive timestamp (control data).
    private let control: UnsafeMutableRawPointer
    private let controlSize: Int
    /// The socket whose receive timestamps were last turned on (-1: none yet).
    /// Per datagram of the last receive, its arrival time (see `UDPDatagram.receivedAt`).
    private let arrivals: UnsafeMutablePointer<UInt64>
    /// The latest arrival time handed out: arrivals never go backwards, even where stamped and
    /// unstamped datagrams meet (the kernel starts stamping a moment after it is asked to).
    private var lastArrival: UInt64 = 0

    /// Preallocates `capacity` buffers of `bufferSize` bytes (default 64 x 2048 B).
    public init(capacity: Int = 64, bufferSize: Int = 2048) {
        precondition(capacity > 0 && capacity <= 1024, "recvmmsg batches hold 1...1024 datagrams")
        precondition(bufferSize > 0, "receive buffers need at least one byte")
        self.capacity = capacity
        self.bufferSize = bufferSize
        storage = .allocate(byteCount: capacity * bufferSize, alignment: 64)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * bufferSize)
        headers = .allocate(capacity: capacity)
        vectors = .allocate(capacity: capacity)
        addresses = .allocate(capacity: capacity)
        addresses.initialize(repeating: sockaddr_storage(), count: capacity)
        controlSize = cms_receive_control_size()
        control = .allocate(byteCount: capacity * controlSize, alignment: 16)
        control.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * controlSize)
        arrivals = .allocate(capacity: capacity)
        arrivals.initialize(repeating: 0, count: capacity)
        for i in 0..<capacity {
            vectors.advanced(by: i).initialize(to: iovec(iov_base: storage + i * bufferSize, iov_len: bufferSize))
            var header = msghdr()
            header.msg_iov = vectors + i
            header.msg_iovlen = 1
            header.msg_name = UnsafeMutableRawPointer(addresses + i)
            headers.advanced(by: i).initialize(to: cms_mmsghdr(msg_hdr: header, msg_len: 0))
        }
    }

    deinit {
        storage.deallocate()
        headers.deallocate()
        vectors.deallocate()
        addresses.deallocate()
        control.deallocate()
        arrivals.deallocate()
    }

    /// Receives up to `capacity` datagrams with one `recvmmsg`. With `wait` the call blocks (per the
    /// socket's mode and `SO_RCVTIMEO`) until one datagram arrives, then takes whatever else is
    /// queued (`MSG_WAITFORONE`); without it the call never blocks and returns 0 when nothing is queued.
    /// Errors other than `wouldBlock`/`interrupted` throw.
    public func receive(from socket: UDPSocket, wait: Bool) throws(SocketError) -> Int {
        count = 0
        for i in 0..<capacity {
            headers[i].msg_hdr.msg_control = control + i * controlSize
            headers[i].msg_hdr.msg_controllen = controlSize
            headers[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
            headers[i].msg_hdr.msg_flags = 0
            headers[i].msg_len = 0
        }
        let flags = wait ? Int32(MSG_WAITFORONE) : Int32(MSG_DONTWAIT)
        let rc = cms_recvmmsg(socket.descriptor, headers, UInt32(capacity), flags, nil)
        receivedAt = .now
        let receivedAtNanoseconds = receivedAt.nanoseconds
        if rc < 0 {
            let code = SocketErrno.current
            if code == .wouldBlock || code == .interrupted { return 0 }
            throw SocketError(code, operation: "recvmmsg", address: try? socket.localAddress())
        }
        count = Int(rc)
        // Kernel stamps mapped onto the monotonic clock; never after the batch was read (a
        // wall-clock step between the clock reads is absorbed by that bound), never before the
        // previous datagram.
        var realtime = timespec()
        clock_gettime(CLOCK_REALTIME, &realtime)
        let realtimeToMonotonic =
            Int64(bitPattern: receivedAtNanoseconds) - (Int64(realtime.tv_sec) * 1_000_000_000 + Int64(realtime.tv_nsec))
        for i in 0..<count {
            var arrival = receivedAtNanoseconds
            let stamp = withUnsafePointer(to: headers[i].msg_hdr) { cms_receive_timestamp_ns($0) }
            if stamp >= 0 {
                let mapped = Int64(stamp) + realtimeToMonotonic
                if mapped > 0 && mapped < Int64(bitPattern: receivedAtNanoseconds) { arrival = UInt64(mapped) }
            }
            arrival = max(arrival, lastArrival)
            lastArrival = arrival
            arrivals[i] = arrival
        }
        return count
    }

    /// The `index`th datagram of the last receive.
    public subscript(index: Int) -> UDPDatagram {
        precondition(index >= 0 && index < count, "datagram index out of range")
        let header = headers[index]
        let length = min(Int(header.msg_len), bufferSize)
        let source: SocketAddress? =
            header.msg_hdr.msg_namelen > 0
            ? SocketAddress(sockaddr: UnsafeRawPointer(addresses + index).assumingMemoryBound(to: sockaddr.self))
            : nil
        return UDPDatagram(
            bytes: UnsafeRawBufferPointer(start: storage + index * bufferSize, count: length),
            source: source, receivedAt: MonotonicTime(nanoseconds: arrivals[index]),
            isTruncated: header.msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0,
            header: UnsafeRawPointer(headers + index).assumingMemoryBound(to: msghdr.self))
    }
}
