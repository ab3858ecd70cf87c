internal import CMediaShims
// The send functions the TURN client's hot path uses: gathered writes of a small header and the
// caller's payload without copying either.
import Glibc

/// Gathered sends of up to three parts without copying them (`sendmsg` with iovecs on the stack).
/// Thread rule: stateless; the caller serialises writes on a stream. Cost: one system call (more
/// only when a stream takes part of the bytes).
enum TURNGatheredSend {
    /// Sends `a`, `b`, `c` as one datagram to `name` (UDP). Returns the bytes sent or -1.
    static func datagram(
        _ fd: Int32, to name: UnsafeMutablePointer<sockaddr_storage>, length: socklen_t,
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer
    ) -> Int {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 3) { iov in
            iov[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count)
            iov[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
            iov[2] = iovec(iov_base: UnsafeMutableRawPointer(mutating: c.baseAddress), iov_len: c.count)
            var message = msghdr()
            message.msg_name = UnsafeMutableRawPointer(name)
            message.msg_namelen = length
            message.msg_iov = iov.baseAddress
            message.msg_iovlen = 3
            while true {
                let rc = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
                if rc < 0 && errno == EINTR { continue }
                return rc
            }
        }
    }

    /// Writes all of `a`, `b`, `c` to the stream `fd` (nonblocking), waiting for room up to
    /// `timeoutMilliseconds` in total. False when the stream failed or stayed full: the caller must
    /// then drop the connection, as a frame may be cut.
    static func stream(
        _ fd: Int32, timeoutMilliseconds: Int32,
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer
    ) -> Bool {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 3) { iov in
            iov[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count)
            iov[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count)
            iov[2] = iovec(iov_base: UnsafeMutableRawPointer(mutating: c.baseAddress), iov_len: c.count)
            var first = 0
            var waited: Int32 = 0
            while first < 3 {
                if iov[first].iov_len == 0 { first += 1; continue }
                var message = msghdr()
                message.msg_iov = iov.baseAddress! + first
                message.msg_iovlen = 3 - first
                var rc = sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
                if rc < 0 {
                    if errno == EINTR { continue }
                    guard errno == EAGAIN || errno == EWOULDBLOCK, waited < timeoutMilliseconds else { return false }
                    var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&entry, 1, 20)
                    waited += 20
                    continue
                }
                while rc > 0 && first < 3 {
                    if rc >= iov[first].iov_len {
                        rc -= iov[first].iov_len
                        iov[first].iov_len = 0
                        first += 1
                    } else {
                        iov[first].iov_base = iov[first].iov_base! + rc
                        iov[first].iov_len -= rc
                        rc = 0
                    }
                }
            }
            return true
        }
    }
}
