// WebRTC data channels (RFC 8831) of a PeerConnection: the app-facing `DataChannel`, its options,
// messages and errors. The protocol (DCEP, RFC 8832) and the SCTP association under the channels
// are in PeerConnection+DataChannel.swift; docs/webrtc.md, "Data channels", describes both.
import Dispatch
import Synchronization

/// How a data channel delivers, chosen when it is made (W3C `RTCDataChannelInit`).
/// Thread rule: a value type. Cost: none.
package struct DataChannelOptions: Sendable, Hashable {
    /// Messages arrive in the order they were sent (false: as they arrive).
    package var ordered = true
    /// Partial reliability: a message is given up after this many retransmissions (0: sent once).
    /// At most one of `maxRetransmits` and `maxPacketLifeTime`; neither: fully reliable.
    package var maxRetransmits: Int?
    /// Partial reliability: a message is given up this many milliseconds after it was sent.
    package var maxPacketLifeTime: Int?
    /// The subprotocol name carried to the peer (at most 65,535 bytes of UTF-8).
    package var `protocol` = ""
    /// True: both sides make the channel themselves with the same `id` and options, and no
    /// DATA_CHANNEL_OPEN is sent (RFC 8832 is not used); it opens when the association is up.
    package var negotiated = false
    /// The SCTP stream id (0-1023), required when `negotiated`; nil: chosen by our DTLS role
    /// (even ids for the DTLS client, odd for the server, RFC 8832 §6).
    package var id: UInt16?

    /// Reliable and ordered, in-band negotiated (the W3C defaults).
    package init() {}
}

/// Where a data channel stands (W3C `RTCDataChannelState`). Thread rule: a value type. Cost: none.
package enum DataChannelState: String, Sendable, Hashable {
    /// Made; the association is not up yet (or the open is on its way).
    case connecting
    /// Messages can be sent and arrive.
    case open
    /// `close()` was called; the stream reset is under way.
    case closing
    /// Closed by either side or with the connection; nothing more is sent or delivered.
    case closed
}

/// One message of a data channel: text (PPID 51, or 56 when empty) or binary (53, or 57 when empty).
/// Thread rule: a value type. Cost: none.
package enum DataChannelMessage: Sendable, Hashable {
    case text(String)
    case binary([UInt8])

    /// The message's length on the wire (UTF-8 bytes for text).
    package var count: Int {
        switch self {
        case .text(let s): s.utf8.count
        case .binary(let b): b.count
        }
    }
}

/// Why a data channel call was refused. Thread rule: a value type. Cost: none.
package enum DataChannelError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The channel is closing or closed, or the connection is closed or failed.
    case invalidState(String)
    /// The message is larger than the peer's `a=max-message-size` (or our own limit): the size
    /// and the limit.
    case messageTooLarge(size: Int, limit: Int)
    /// More than `PeerConnectionDataChannels.maxBufferedBytes` would wait to be sent.
    case bufferFull
    /// Options that cannot work: both partial-reliability limits, a negotiated channel without an
    /// id, an id out of range or in use, a label or protocol too long.
    case invalidOptions(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .invalidState(let s): "invalid state: \(s)"
        case .messageTooLarge(let size, let limit): "message of \(size) bytes is over the limit of \(limit)"
        case .bufferFull: "the send buffer is full"
        case .invalidOptions(let s): "invalid options: \(s)"
        }
    }
}

/// Counters of a connection's data channels. Thread rule: a value type (a copy). Cost: none.
package struct DataChannelStatistics: Sendable, Hashable {
    /// Messages handed to SCTP, and those delivered to `onMessage`.
    package var messagesSent = 0
    package var messagesReceived = 0
    /// Bytes of the messages above.
    package var bytesSent = 0
    package var bytesReceived = 0
    /// Messages dropped on receipt: over our `maxMessageSize` (or the reassembly bound), on a
    /// stream with no open channel, with an unknown PPID, or a DCEP message that makes no sense.
    package var messagesTooLargeDropped = 0
    package var messagesWithoutChannelDropped = 0
    package var unknownPPIDDropped = 0
    package var malformedControlDropped = 0
    /// Channels the peer opened, and opens refused (our parity, an id in use, over the bound).
    package var channelsOpenedByPeer = 0
    package var peerOpensRefused = 0
    /// SCTP packets that went out and came in (DTLS application data records).
    package var packetsSent = 0
    package var packetsReceived = 0
}

/// One data channel (W3C `RTCDataChannel`): made by `PeerConnection.createDataChannel(label:options:)`
/// or handed to `PeerConnection.onDataChannel` when the peer opened it.
///
/// `send` takes text or bytes and queues them; `bufferedAmount` counts what is queued and not yet
/// taken by SCTP, and `onBufferedAmountLow` runs when it falls to `bufferedAmountLowThreshold`.
/// Thread rule: every method and property from any thread; the callbacks (`onOpen`, `onMessage`,
/// `onClose`, `onBufferedAmountLow`) run on the connection's serial queue, one at a time, and may
/// call `send` and `close`. Cost: `send` copies the message once (text as UTF-8) and, off the
/// connection's queue, dispatches one block to it; SCTP copies it again into its send buffer.
package final class DataChannel: Sendable {
    /// The label given by the side that made it.
    package let label: String
    /// The options it was made with (for a channel the peer opened: what its open said).
    package let options: DataChannelOptions

    struct State {
        var readyState = DataChannelState.connecting
        var id: UInt16?
        var bufferedAmount = 0
        var lowThreshold = 0
        var onOpen: (@Sendable () -> Void)?
        /// Whether `onOpen` has been run (or handed to the queue to run).
        var openAnnounced = false
        var onMessage: (@Sendable (DataChannelMessage) -> Void)?
        var onClose: (@Sendable () -> Void)?
        var onBufferedAmountLow: (@Sendable () -> Void)?
    }
    let state = Mutex(State())
    /// The connection's data channel machinery; it owns the channel's protocol state on its queue.
    let owner: PeerConnectionDataChannels
    /// Whether the channel is ours (we opened it in-band, or it is negotiated) or the peer's.
    let locallyMade: Bool

    package init(label: String, options: DataChannelOptions, id: UInt16?, locallyMade: Bool, owner: PeerConnectionDataChannels) {
        self.label = label
        self.options = options
        self.locallyMade = locallyMade
        self.owner = owner
        state.withLock { $0.id = id }
    }

    /// The SCTP stream id: known once our DTLS role is (nil before for a channel with no `id` option).
    /// Thread rule: any thread. Cost: a lock.
    package var id: UInt16? { state.withLock { $0.id } }

    /// Where the channel stands. Thread rule: any thread. Cost: a lock.
    package var readyState: DataChannelState { state.withLock { $0.readyState } }

    /// Bytes given to `send` and not yet taken by SCTP. SCTP's own send buffer (1 MiB) is not
    /// counted. Thread rule: any thread. Cost: a lock.
    package var bufferedAmount: Int { state.withLock { $0.bufferedAmount } }

    /// `onBufferedAmountLow` runs when `bufferedAmount` falls from above this to at most it.
    /// Thread rule: any thread. Cost: a lock.
    package var bufferedAmountLowThreshold: Int {
        get { state.withLock { $0.lowThreshold } }
        set { state.withLock { $0.lowThreshold = max(0, newValue) } }
    }

    /// Runs once when the channel opens (on the connection's queue). Set on a channel that is
    /// already open and whose opening nobody was told of yet, it runs then, on the queue: so a
    /// channel made on a running connection may get its `onOpen` after `createDataChannel` returns.
    package var onOpen: (@Sendable () -> Void)? {
        get { state.withLock { $0.onOpen } }
        set {
            let late = state.withLock { s -> Bool in
                s.onOpen = newValue
                guard newValue != nil, s.readyState == .open, !s.openAnnounced else { return false }
                s.openAnnounced = true
                return true
            }
            if late, let newValue { owner.whenOnQueue(newValue) }
        }
    }

    /// Tells `onOpen`, once, that the channel is open; runs on the connection's queue.
    func announceOpen() {
        let callback = state.withLock { s -> (@Sendable () -> Void)? in
            guard !s.openAnnounced, let cb = s.onOpen else { return nil }
            s.openAnnounced = true
            return cb
        }
        callback?()
    }

    /// Each message as it arrives (on the connection's queue, in order on an ordered channel).
    package var onMessage: (@Sendable (DataChannelMessage) -> Void)? {
        get { state.withLock { $0.onMessage } }
        set { state.withLock { $0.onMessage = newValue } }
    }

    /// Runs once when the channel is closed, by either side or with the connection (on the
    /// connection's queue).
    package var onClose: (@Sendable () -> Void)? {
        get { state.withLock { $0.onClose } }
        set { state.withLock { $0.onClose = newValue } }
    }

    /// Runs when `bufferedAmount` falls to `bufferedAmountLowThreshold` (on the connection's queue).
    package var onBufferedAmountLow: (@Sendable () -> Void)? {
        get { state.withLock { $0.onBufferedAmountLow } }
        set { state.withLock { $0.onBufferedAmountLow = newValue } }
    }

    /// Queues `text` as one message (PPID 51). Throws `.invalidState` when closing or closed,
    /// `.messageTooLarge` over the peer's limit, `.bufferFull` over the connection's send bound.
    /// Messages given while `.connecting` go out once the channel opens.
    /// Thread rule: any thread. Cost: one copy to UTF-8.
    package func send(_ text: String) throws(DataChannelError) {
        try owner.send(.text(text), on: self)
    }

    /// Queues `bytes` as one binary message (PPID 53); as `send(_:)` for text.
    package func send(_ bytes: [UInt8]) throws(DataChannelError) {
        try owner.send(.binary(bytes), on: self)
    }

    /// Closes the channel: what is queued is still sent, then our stream is reset and the peer
    /// resets its own (RFC 8831 §6.7); `onClose` runs then. Idempotent.
    /// Thread rule: any thread. Cost: one block on the connection's queue.
    package func close() { owner.close(self) }
}
