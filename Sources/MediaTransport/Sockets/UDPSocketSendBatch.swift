internal import CMediaShims
import Glibc
import MediaBase

/// Up to `capacity` datagrams sent with one `sendmmsg(2)`. The header, iovec and address arrays are
/// allocated once in `init`; `append` only fills slots, so a batch costs no allocation.
/// `append` keeps a pointer to the caller's bytes: they must stay valid until `send(on:)` returns.
///
/// Thread rule: one thread at a time. Cost: one system call per `send(on:)` (more only after an error).
package final class UDPSendBatch {
    /// What one `send(on:)` achieved.
    package struct Result: Sendable, Equatable {
        /// Datagrams the kernel accepted.
        package var sent = 0
        /// Bytes in those datagrams.
        package var bytesSent = 0
        /// Datagrams not sent because of an error (they are dropped, not retried).
        package var dropped = 0
        /// The last error seen, if any.
        package var lastError: SocketError? = nil
    }

    /// Most datagrams one batch holds.
    package let capacity: Int
    /// Datagrams appended since the last send.
    package private(set) var count = 0

    private let headers: UnsafeMutablePointer<cms_mmsghdr>
    private let vectors: UnsafeMutablePointer<iovec>
    private let addresses: UnsafeMutablePointer<sockaddr_storage>

    /// Preallocates room for `capacity` datagrams (Linux accepts at most 1024 per call).
    package init(capacity: Int = 64) {
        precondition(capacity > 0 && capacity <= 1024, "sendmmsg batches hold 1...1024 datagrams")
        self.capacity = capacity
        headers = .allocate(capacity: capacity)
        headers.initialize(repeating: cms_mmsghdr(), count: capacity)
        vectors = .allocate(capacity: capacity)
        vectors.initialize(repeating: iovec(), count: capacity)
        addresses = .allocate(capacity: capacity)
        addresses.initialize(repeating: sockaddr_storage(), count: capacity)
    }

    deinit {
        headers.deallocate()
        vectors.deallocate()
        addresses.deallocate()
    }

    /// True when no more datagrams fit.
    package var isFull: Bool { count == capacity }

    /// Adds a datagram for `destination` (nil on a connected socket). Returns false when full.
    /// The bytes are not copied: keep them valid until `send(on:)` returns.
    @discardableResult
    package func append(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress? = nil) -> Bool {
        guard count < capacity else { return false }
        let i = count
        vectors[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
        var header = msghdr()
        header.msg_iov = vectors + i
        header.msg_iovlen = 1
        if let destination {
            header.msg_namelen = destination.write(into: addresses + i)
            header.msg_name = UnsafeMutableRawPointer(addresses + i)
        }
        headers[i] = cms_mmsghdr(msg_hdr: header, msg_len: 0)
        count += 1
        return true
    }

    /// Rewrites IPv4 destinations as v4-mapped IPv6 ones, the form a dual-stack socket sends to.
    /// Cost: one family test per datagram, and a rewrite of the IPv4 ones.
    private func mapIPv4Destinations() {
        for i in 0..<count where headers[i].msg_hdr.msg_name != nil && addresses[i].ss_family == sa_family_t(AF_INET) {
            guard let address = SocketAddress(sockaddr: UnsafeRawPointer(addresses + i).assumingMemoryBound(to: sockaddr.self))
            else { continue }
            headers[i].msg_hdr.msg_namelen = address.write(into: addresses + i, socketFamily: .ipv6)
        }
    }

    /// Forgets the appended datagrams without sending them.
    package func removeAll() { count = 0 }

    /// Sends every appended datagram with `sendmmsg`, then empties the batch. A datagram the
    /// kernel refuses is dropped and counted, the rest still go out; on `wouldBlock` (full send
    /// buffer of a non-blocking socket) the remainder is dropped. Never throws.
    @discardableResult
    package func send(on socket: UDPSocket) -> Result {
        var result = Result()
        if socket.isDualStack { mapIPv4Destinations() }
        var start = 0
        while start < count {
            let rc = cms_sendmmsg(socket.descriptor, headers + start, UInt32(count - start), Int32(MSG_NOSIGNAL))
            if rc > 0 {
                for i in start..<(start + Int(rc)) { result.bytesSent += Int(headers[i].msg_len) }
                result.sent += Int(rc)
                start += Int(rc)
                continue
            }
            let code = SocketErrno(rawValue: rc == 0 ? EAGAIN : errno)
            if code == .interrupted { continue }
            let destination =
                headers[start].msg_hdr.msg_name.flatMap {
                    SocketAddress(sockaddr: $0.assumingMemoryBound(to: sockaddr.self))
                } ?? socket.connectedAddress
            result.lastError = SocketError(code, operation: "sendmmsg", address: destination)
            if code == .wouldBlock {
                result.dropped += count - start
                break
            }
            result.dropped += 1
            start += 1
        }
        count = 0
        return result
    }
}
