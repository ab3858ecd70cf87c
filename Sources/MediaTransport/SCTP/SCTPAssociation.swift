// One SCTP association over DTLS (RFC 8261) for WebRTC data channels, on usrsctp through
// CMediaShims (cms_sctp.h): the packets it takes come from DTLS application data, the packets it
// makes go out as DTLS application data. The data channel protocol on top is in DataChannel*.swift.
internal import CMediaShims
import Synchronization

/// The callbacks of one association, kept alive for usrsctp (which names the association by
/// this object's address) until the association is freed.
/// Thread rule: immutable; both closures are called on the owner's thread inside
/// `SCTPAssociation` calls and on usrsctp's timer thread. Cost: none.
package final class SCTPCallbacks: Sendable {
    package let output: @Sendable (UnsafeRawBufferPointer) -> Void
    package let upcall: @Sendable () -> Void
    package init(output: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, upcall: @escaping @Sendable () -> Void) {
        self.output = output
        self.upcall = upcall
    }
}

/// One SCTP association (RFC 9260) carried over a DTLS transport, as WebRTC data channels use it
/// (RFC 8831): SCTP port `localPort` to the peer's `remotePort`, both sides opening at once,
/// partial reliability (RFC 3758) and stream reset (RFC 6525) on, path MTU fixed at `mtu`.
///
/// `output` gets every packet to send (hand it to `DTLSTransport.sendApplicationData`); packets
/// from the peer go to `input`. `upcall` says there is something to `receive` or room to `send`
/// again. Thread rule: single owner (one serial queue makes every call); `output` and `upcall` run
/// on the owner inside its calls and on usrsctp's timer thread, so they must hand work to the
/// owner rather than call back in. Cost: usrsctp's buffers (`bufferBytes` each way at most) and a
/// share of one process-wide 10 ms timer thread.
package final class SCTPAssociation {
    /// What `receive` found.
    package enum Event {
        /// Nothing waiting.
        case none
        /// Part (or the end, `endOfMessage`) of a message on `stream` with `ppid`; `length` bytes
        /// at the start of the receive buffer.
        case data(stream: UInt16, ppid: UInt32, length: Int, endOfMessage: Bool)
        /// The association is up.
        case up
        /// The association is gone.
        case down
        /// The peer reset these incoming streams (it closed those data channels).
        case streamsReset([UInt16])
        /// A notification of no interest.
        case other
    }

    /// How a message is sent: the PR-SCTP policy of RFC 3758 / RFC 7496.
    package enum Reliability: Equatable {
        /// Retransmitted until acknowledged.
        case reliable
        /// Given up after this many retransmissions.
        case retransmissions(UInt32)
        /// Given up this many milliseconds after it was sent.
        case lifetime(UInt32)
    }

    /// What `send` did.
    package enum SendResult: Equatable {
        case sent
        /// No room in the send buffer now: wait for the upcall and try again.
        case wouldBlock
        case failed
    }

    private let handle: OpaquePointer
    private let callbacks: Unmanaged<SCTPCallbacks>
    /// Where received pieces are read (`receiveBufferBytes`).
    package let buffer: UnsafeMutableRawBufferPointer

    /// An association endpoint on SCTP port `localPort`; `connect` starts it. Throws the
    /// reason as text when usrsctp refuses.
    package init(
        localPort: UInt16, mtu: Int, streams: UInt16, bufferBytes: Int, receiveBufferBytes: Int,
        callbacks: SCTPCallbacks
    ) throws(SCTPSetupError) {
        let retained = Unmanaged.passRetained(callbacks)
        var error = [CChar](repeating: 0, count: 256)
        let output: cms_sctp_output_fn = { context, packet, length in
            guard let context, let packet else { return }
            Unmanaged<SCTPCallbacks>.fromOpaque(context).takeUnretainedValue()
                .output(UnsafeRawBufferPointer(start: packet, count: length))
        }
        let upcall: cms_sctp_upcall_fn = { context in
            guard let context else { return }
            Unmanaged<SCTPCallbacks>.fromOpaque(context).takeUnretainedValue().upcall()
        }
        guard
            let made = cms_sctp_new(
                localPort, Int32(mtu), streams, Int32(bufferBytes), output, upcall, retained.toOpaque(), &error,
                error.count)
        else {
            retained.release()
            throw SCTPSetupError(reason: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        handle = made
        self.callbacks = retained
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(receiveBufferBytes, 4096), alignment: 16)
    }

    deinit {
        cms_sctp_free(handle)
        callbacks.release()
        buffer.deallocate()
    }

    /// Starts the association to the peer's port. Returns false when usrsctp refuses at once.
    package func connect(remotePort: UInt16) -> Bool { cms_sctp_connect(handle, remotePort) == 0 }

    /// One SCTP packet from the peer.
    package func input(_ packet: UnsafeRawBufferPointer) {
        guard let base = packet.baseAddress, !packet.isEmpty else { return }
        cms_sctp_input(handle, base, packet.count)
    }

    /// Sends one whole message (not empty). Cost: a copy into usrsctp's send buffer.
    package func send(
        stream: UInt16, ppid: UInt32, unordered: Bool, reliability: Reliability, _ bytes: UnsafeRawBufferPointer
    ) -> SendResult {
        let (policy, value): (Int32, UInt32) =
            switch reliability {
            case .reliable: (0, 0)
            case .lifetime(let ms): (1, ms)
            case .retransmissions(let n): (3, n)
            }
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .failed }
        let n = cms_sctp_send(handle, stream, ppid, unordered ? 1 : 0, policy, value, base, bytes.count)
        if n == Int(CMS_SCTP_WOULD_BLOCK) { return .wouldBlock }
        return n == bytes.count ? .sent : .failed
    }

    /// The next piece waiting, read into `buffer`.
    package func receive() -> Event {
        var info = cms_sctp_received()
        let kind = cms_sctp_receive(handle, buffer.baseAddress, buffer.count, &info)
        switch kind {
        case Int32(CMS_SCTP_NONE): return .none
        case Int32(CMS_SCTP_DATA):
            return .data(stream: info.stream, ppid: info.ppid, length: info.length, endOfMessage: info.end_of_message != 0)
        case Int32(CMS_SCTP_UP): return .up
        case Int32(CMS_SCTP_STREAMS_RESET):
            let ids = (0..<info.length).map { buffer.load(fromByteOffset: $0 * 2, as: UInt16.self) }
            return .streamsReset(ids)
        case Int32(CMS_SCTP_OTHER): return .other
        default: return .down
        }
    }

    /// Resets our outgoing `stream` (closes its data channel). Returns false when usrsctp
    /// refuses now (a reset already under way): try again later.
    package func resetStream(_ stream: UInt16) -> Bool { cms_sctp_reset_stream(handle, stream) == 0 }
}

/// usrsctp refused to make an association (the reason). Thread rule: a value type. Cost: none.
package struct SCTPSetupError: Error, CustomStringConvertible {
    package let reason: String
    package var description: String { "SCTP: \(reason)" }
}
