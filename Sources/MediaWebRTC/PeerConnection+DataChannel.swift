// Data channels of a PeerConnection (RFC 8831): one SCTP association over the connection's DTLS
// transport (RFC 8261, SCTP port 5000 both sides), and on it the Data Channel Establishment
// Protocol (RFC 8832): DATA_CHANNEL_OPEN and ACK for in-band channels, none for negotiated ones.
import Dispatch
import MediaTransport
import Synchronization

/// The data channel machinery of one `PeerConnection`: the SCTP association, the channels by
/// stream id, the send queue, reassembly of messages SCTP hands over in parts, and DCEP.
///
/// Thread rule: everything in `Queued` only on the connection's queue; `shared` from any thread.
/// Cost: nothing until a channel or a data section exists; then usrsctp's buffers (1 MiB each
/// way), what waits to be sent (at most `maxBufferedBytes`) and a partial message being reassembled
/// (at most `maxMessageSize`).
/// Sendable: `queued` is used only on `queue`; the rest is `let`s and the `shared` Mutex.
package final class PeerConnectionDataChannels: @unchecked Sendable {
    /// The SCTP port both sides use (RFC 8841 allows others; every browser uses 5000).
    static let sctpPort: UInt16 = 5000
    /// The largest message we take, and announce in `a=max-message-size` (as browsers do).
    package static let maxMessageSize = 262_144
    /// The largest message we send whatever the peer allows (it must fit usrsctp's send buffer).
    static let maxSendMessageSize = 1 << 20
    /// Bytes that may wait in our send queue across all channels; `send` throws `.bufferFull` past it.
    package static let maxBufferedBytes = 16 << 20
    /// The longest label and protocol (together, in bytes) of a channel the peer opens: with at
    /// most 512 channels of its parity, what the peer makes us keep stays within 4 MiB.
    static let maxPeerLabelBytes = 8192
    /// Streams each way (ids 0-1023), as browsers offer.
    static let streams: UInt16 = 1024
    /// The SCTP path MTU: with DTLS's record overhead (at most 37 bytes with AES-GCM, 65 with
    /// CBC) a packet stays within the 1,200-byte datagrams of DTLS.
    static let mtu = 1130
    /// usrsctp's send and receive buffers.
    static let bufferBytes = 1 << 20

    /// DCEP message types (RFC 8832 §8.2.1) and PPIDs (RFC 8831 §8).
    enum PPID {
        static let control: UInt32 = 50, text: UInt32 = 51, binary: UInt32 = 53
        static let emptyText: UInt32 = 56, emptyBinary: UInt32 = 57
    }
    static let openType: UInt8 = 0x03, ackType: UInt8 = 0x02

    /// One message (or control step) waiting for SCTP, in order.
    struct Outgoing {
        enum Kind {
            case message(DataChannel, ppid: UInt32, size: Int)
            case control(stream: UInt16)
            case reset(DataChannel, stream: UInt16)
        }
        var kind: Kind
        var bytes: [UInt8]
    }

    package struct Queued {
        var association: SCTPAssociation?
        package var up = false
        var role: DTLSTransport.Role?
        var sendPacket: ((UnsafeRawBufferPointer) -> Void)?
        var channels: [UInt16: DataChannel] = [:]
        /// Our channels made before our DTLS role (and so their stream ids) was known.
        var unassigned: [DataChannel] = []
        /// In-band channels we opened whose ACK has not come: their messages go ordered (RFC 8832 §6).
        var awaitingAck: Set<UInt16> = []
        var sendQueue: [Outgoing] = []
        var sendHead = 0
        var flushing = false
        /// A message SCTP handed over in parts: its stream, PPID and bytes so far; or a stream
        /// whose message is being discarded (over the limit) until its end.
        var partial: (stream: UInt16, ppid: UInt32, bytes: [UInt8])?
        var discarding: UInt16?
        var shutDown = false
    }
    package var queued = Queued()

    package struct Shared {
        package var onDataChannel: (@Sendable (DataChannel) -> Void)?
        package var statistics = DataChannelStatistics()
        var buffered = 0
        var sendLimit = JSEPDataChannelParameters.defaultMaxMessageSize
        /// A channel was made, so offers carry a data section.
        var wanted = false
        var shutDown = false
    }
    package let shared = Mutex(Shared())
    let pumpScheduled = Atomic<Bool>(false)
    let queue: DispatchQueue
    let queueKey: DispatchSpecificKey<UInt8>

    package init(queue: DispatchQueue, queueKey: DispatchSpecificKey<UInt8>) {
        self.queue = queue
        self.queueKey = queueKey
    }

    var isOnQueue: Bool { DispatchQueue.getSpecific(key: queueKey) != nil }

    func onQueue(_ body: () -> Void) {
        if isOnQueue { body() } else { queue.sync(execute: body) }
    }

    /// Runs `body` on the queue: now when already on it, else later (async).
    func whenOnQueue(_ body: @escaping @Sendable () -> Void) {
        if isOnQueue { body() } else { queue.async(execute: body) }
    }

    // MARK: Channels from the app

    /// Makes and registers a channel we open (see `PeerConnection.createDataChannel`).
    package func create(label: String, options: DataChannelOptions) throws(DataChannelError) -> DataChannel {
        if options.maxRetransmits != nil && options.maxPacketLifeTime != nil {
            throw .invalidOptions("maxRetransmits and maxPacketLifeTime together")
        }
        if let r = options.maxRetransmits, r < 0 || r > Int(UInt32.max) { throw .invalidOptions("maxRetransmits \(r)") }
        if let l = options.maxPacketLifeTime, l < 0 || l > Int(UInt32.max) { throw .invalidOptions("maxPacketLifeTime \(l)") }
        if options.negotiated && options.id == nil { throw .invalidOptions("a negotiated channel needs an id") }
        if let id = options.id, id >= Self.streams { throw .invalidOptions("id \(id) is not below \(Self.streams)") }
        if label.utf8.count > 65_535 || options.protocol.utf8.count > 65_535 {
            throw .invalidOptions("label or protocol over 65,535 bytes")
        }
        let channel = DataChannel(label: label, options: options, id: options.id, locallyMade: true, owner: self)
        var failure: DataChannelError?
        onQueue {
            if queued.shutDown { return failure = .invalidState("the connection or its SCTP association has ended") }
            if let id = options.id {
                if queued.channels[id] != nil { return failure = .invalidOptions("id \(id) is in use") }
                queued.channels[id] = channel
            } else if let role = queued.role {
                guard let id = freeID(role: role) else { return failure = .invalidOptions("no stream id left") }
                channel.state.withLock { $0.id = id }
                queued.channels[id] = channel
            } else {
                queued.unassigned.append(channel)
            }
            // Opened on the queue's next turn; `onOpen` set after this returns is still told (see its setter).
            if queued.up { queue.async { [self] in open(channel) } }
        }
        if let failure { throw failure }
        shared.withLock { $0.wanted = true }
        return channel
    }

    /// Queues a message of `channel` (see `DataChannel.send`).
    func send(_ message: DataChannelMessage, on channel: DataChannel) throws(DataChannelError) {
        let state = channel.readyState
        guard state == .connecting || state == .open else { throw .invalidState("the channel is \(state.rawValue)") }
        let size = message.count
        try shared.withLock { s throws(DataChannelError) in
            if s.shutDown { throw .invalidState("the connection or its SCTP association has ended") }
            let limit = min(s.sendLimit == 0 ? Self.maxSendMessageSize : s.sendLimit, Self.maxSendMessageSize)
            if size > limit { throw .messageTooLarge(size: size, limit: limit) }
            if s.buffered + size > Self.maxBufferedBytes { throw .bufferFull }
            s.buffered += size
        }
        channel.state.withLock { $0.bufferedAmount += size }
        let ppid: UInt32
        var bytes: [UInt8]
        switch message {
        case .text(let t):
            ppid = size == 0 ? PPID.emptyText : PPID.text
            bytes = Array(t.utf8)
        case .binary(let b):
            ppid = size == 0 ? PPID.emptyBinary : PPID.binary
            bytes = b
        }
        // An empty message is one zero byte under its own PPID (RFC 8831 §6.6).
        if bytes.isEmpty { bytes = [0] }
        let item = Outgoing(kind: .message(channel, ppid: ppid, size: size), bytes: bytes)
        whenOnQueue { [self] in
            queued.sendQueue.append(item)
            flushSends()
        }
    }

    /// Closes `channel` (see `DataChannel.close`).
    func close(_ channel: DataChannel) {
        whenOnQueue { [self] in
            let state = channel.readyState
            guard state == .connecting || state == .open else { return }
            guard queued.up, let id = channel.id, queued.channels[id] === channel else {
                return finish(channel)
            }
            channel.state.withLock { $0.readyState = .closing }
            queued.sendQueue.append(Outgoing(kind: .reset(channel, stream: id), bytes: []))
            flushSends()
        }
    }

    // MARK: The association

    /// On the queue, once DTLS is connected and an exchange accepted a data section: makes the
    /// association and opens it to the peer's `remotePort`. `send` carries each SCTP packet as DTLS
    /// application data. Returns the reason when usrsctp refuses.
    package func start(
        role: DTLSTransport.Role, remotePort: UInt16, remoteMaxMessageSize: Int,
        send: @escaping (UnsafeRawBufferPointer) -> Void
    ) -> String? {
        guard queued.association == nil, !queued.shutDown else { return nil }
        shared.withLock { $0.sendLimit = remoteMaxMessageSize }
        queued.role = role
        queued.sendPacket = send
        let callbacks = SCTPCallbacks(
            output: { [weak self] packet in
                guard let self else { return }
                if self.isOnQueue {
                    self.transmit(packet)
                } else {
                    let copy = Array(packet)
                    self.queue.async { copy.withUnsafeBytes { self.transmit($0) } }
                }
            },
            upcall: { [weak self] in self?.schedulePump() })
        let association: SCTPAssociation
        do {
            association = try SCTPAssociation(
                localPort: Self.sctpPort, mtu: Self.mtu, streams: Self.streams, bufferBytes: Self.bufferBytes,
                receiveBufferBytes: 65_536, callbacks: callbacks)
        } catch {
            return error.description
        }
        queued.association = association
        for channel in queued.unassigned {
            if let id = freeID(role: role) {
                channel.state.withLock { $0.id = id }
                queued.channels[id] = channel
            } else {
                finish(channel)
            }
        }
        queued.unassigned.removeAll()
        guard association.connect(remotePort: remotePort) else { return "SCTP connect refused" }
        return nil
    }

    /// On the queue: an SCTP packet from the peer (a DTLS application data record).
    package func input(_ packet: UnsafeRawBufferPointer) {
        guard let association = queued.association else { return }
        shared.withLock { $0.statistics.packetsReceived += 1 }
        association.input(packet)
        pump()
    }

    /// On the queue: a packet usrsctp made, out as DTLS application data.
    private func transmit(_ packet: UnsafeRawBufferPointer) {
        guard !queued.shutDown, let send = queued.sendPacket else { return }
        shared.withLock { $0.statistics.packetsSent += 1 }
        send(packet)
    }

    /// A pump on the queue soon (from usrsctp's upcall, on any thread); several coalesce into one.
    private func schedulePump() {
        guard !pumpScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [weak self] in
            guard let self else { return }
            self.pumpScheduled.store(false, ordering: .releasing)
            self.pump()
        }
    }

    /// On the queue: reads what the association has (events and messages) and sends what waits.
    /// Also called from the connection's 20 ms timer, for a stream reset refused earlier.
    func pump() {
        guard let association = queued.association else { return }
        for _ in 0..<4096 {
            switch association.receive() {
            case .none:
                flushSends()
                return
            case .up:
                associationUp()
            case .down:
                shutdown()
                return
            case .streamsReset(let ids):
                for id in ids { peerReset(id) }
            case .other:
                break
            case .data(let stream, let ppid, let length, let end):
                received(stream: stream, ppid: ppid, UnsafeRawBufferPointer(rebasing: association.buffer[0..<length]), end: end)
            }
            if queued.association == nil { return }
        }
        // More than a pump's share waits: the rest on the next turn of the queue.
        schedulePump()
    }

    private func associationUp() {
        guard !queued.up else { return }
        queued.up = true
        for channel in queued.channels.values.sorted(by: { ($0.id ?? 0) < ($1.id ?? 0) }) where channel.locallyMade {
            open(channel)
        }
        flushSends()
    }

    /// Opens one of our channels on an association that is up: in-band ones send DATA_CHANNEL_OPEN.
    private func open(_ channel: DataChannel) {
        guard let id = channel.id, channel.readyState == .connecting else { return }
        if !channel.options.negotiated {
            // Ahead of the messages given while the channel was connecting.
            queued.sendQueue.insert(Outgoing(kind: .control(stream: id), bytes: Self.openMessage(channel)), at: queued.sendHead)
            queued.awaitingAck.insert(id)
        }
        channel.state.withLock { $0.readyState = .open }
        channel.announceOpen()
        flushSends()
    }

    /// The lowest free stream id of our parity: even for the DTLS client, odd for the server.
    private func freeID(role: DTLSTransport.Role) -> UInt16? {
        var id: UInt16 = role == .active ? 0 : 1
        while id < Self.streams {
            if queued.channels[id] == nil { return id }
            id += 2
        }
        return nil
    }

    // MARK: Sending

    /// On the queue: hands waiting messages to SCTP in order until it has no room.
    private func flushSends() {
        guard queued.up, let association = queued.association, !queued.flushing else { return }
        queued.flushing = true
        defer {
            queued.flushing = false
            if queued.sendHead > 256, queued.sendHead * 2 > queued.sendQueue.count {
                queued.sendQueue.removeFirst(queued.sendHead)
                queued.sendHead = 0
            }
        }
        while queued.sendHead < queued.sendQueue.count, queued.association != nil {
            let item = queued.sendQueue[queued.sendHead]
            switch item.kind {
            case .control(let stream):
                let r = item.bytes.withUnsafeBytes {
                    association.send(stream: stream, ppid: PPID.control, unordered: false, reliability: .reliable, $0)
                }
                if r == .wouldBlock { return }
            case .reset(let channel, let stream):
                // usrsctp refuses while another reset is under way: the timer tries again.
                guard association.resetStream(stream) else { return }
                channel.state.withLock { if $0.readyState != .closed { $0.readyState = .closing } }
            case .message(let channel, let ppid, let size):
                guard let id = channel.id, queued.channels[id] === channel, channel.readyState == .open else {
                    // Closed meanwhile: the message goes with it.
                    queued.sendHead += 1
                    release(channel, size)
                    continue
                }
                let unordered = !channel.options.ordered && !queued.awaitingAck.contains(id)
                let reliability: SCTPAssociation.Reliability =
                    if let r = channel.options.maxRetransmits {
                        .retransmissions(UInt32(r))
                    } else if let l = channel.options.maxPacketLifeTime {
                        .lifetime(UInt32(l))
                    } else {
                        .reliable
                    }
                let r = item.bytes.withUnsafeBytes {
                    association.send(stream: id, ppid: ppid, unordered: unordered, reliability: reliability, $0)
                }
                if r == .wouldBlock { return }
                if r == .sent {
                    shared.withLock {
                        $0.statistics.messagesSent += 1
                        $0.statistics.bytesSent += size
                    }
                }
                queued.sendHead += 1
                queued.sendQueue[queued.sendHead - 1].bytes = []
                release(channel, size)
                continue
            }
            queued.sendHead += 1
        }
        queued.sendQueue.removeAll(keepingCapacity: true)
        queued.sendHead = 0
    }

    /// `size` bytes of `channel` left the queue: lowers `bufferedAmount` and tells
    /// `onBufferedAmountLow` when it fell to the threshold.
    private func release(_ channel: DataChannel, _ size: Int) {
        shared.withLock { $0.buffered -= size }
        let low = channel.state.withLock { s -> (@Sendable () -> Void)? in
            let before = s.bufferedAmount
            s.bufferedAmount -= size
            return before > s.lowThreshold && s.bufferedAmount <= s.lowThreshold ? s.onBufferedAmountLow : nil
        }
        low?()
    }

    // MARK: Receiving

    /// One piece of a message SCTP handed over: whole messages go on, parts are joined (at most
    /// `maxMessageSize`; a longer message is dropped to its end and counted).
    private func received(stream: UInt16, ppid: UInt32, _ bytes: UnsafeRawBufferPointer, end: Bool) {
        if let d = queued.discarding {
            if d == stream, end { queued.discarding = nil }
            if d == stream { return }
        }
        if var p = queued.partial {
            queued.partial = nil
            guard p.stream == stream, p.bytes.count + bytes.count <= Self.maxMessageSize else {
                shared.withLock { $0.statistics.messagesTooLargeDropped += 1 }
                if p.stream == stream && !end { queued.discarding = stream }
                return
            }
            p.bytes.append(contentsOf: bytes)
            if end {
                p.bytes.withUnsafeBytes { message(stream: stream, ppid: p.ppid, $0) }
            } else {
                queued.partial = p
            }
            return
        }
        if end { return message(stream: stream, ppid: ppid, bytes) }
        guard bytes.count <= Self.maxMessageSize else {
            shared.withLock { $0.statistics.messagesTooLargeDropped += 1 }
            queued.discarding = stream
            return
        }
        var first: [UInt8] = []
        first.reserveCapacity(min(Self.maxMessageSize, bytes.count * 4))
        first.append(contentsOf: bytes)
        queued.partial = (stream, ppid, first)
    }

    /// One whole message.
    private func message(stream: UInt16, ppid: UInt32, _ bytes: UnsafeRawBufferPointer) {
        if ppid == PPID.control { return control(stream: stream, bytes) }
        guard let channel = queued.channels[stream], channel.readyState == .open || channel.readyState == .closing else {
            shared.withLock { $0.statistics.messagesWithoutChannelDropped += 1 }
            return
        }
        let m: DataChannelMessage
        switch ppid {
        case PPID.text: m = .text(String(decoding: bytes, as: UTF8.self))
        case PPID.binary: m = .binary(Array(bytes))
        case PPID.emptyText: m = .text("")
        case PPID.emptyBinary: m = .binary([])
        default:
            shared.withLock { $0.statistics.unknownPPIDDropped += 1 }
            return
        }
        // Data on the stream shows the peer has the channel: our messages may go unordered now.
        queued.awaitingAck.remove(stream)
        shared.withLock {
            $0.statistics.messagesReceived += 1
            $0.statistics.bytesReceived += m.count
        }
        if let cb = channel.onMessage { cb(m) }
    }

    /// A DCEP message (RFC 8832 §5).
    private func control(stream: UInt16, _ bytes: UnsafeRawBufferPointer) {
        guard let type = bytes.first else { return malformed() }
        if type == Self.ackType {
            guard bytes.count == 1, queued.awaitingAck.remove(stream) != nil else { return malformed() }
            return
        }
        guard type == Self.openType, let request = Self.parseOpen(bytes) else { return malformed() }
        // The opener's stream id has the opener's parity: the peer's, never ours.
        let peerParity: UInt16 = queued.role == .active ? 1 : 0
        guard stream % 2 == peerParity, stream < Self.streams, queued.channels[stream] == nil,
            request.label.utf8.count + request.protocol.utf8.count <= Self.maxPeerLabelBytes
        else {
            shared.withLock { $0.statistics.peerOpensRefused += 1 }
            return
        }
        var options = DataChannelOptions()
        options.ordered = request.ordered
        options.maxRetransmits = request.maxRetransmits
        options.maxPacketLifeTime = request.maxPacketLifeTime
        options.protocol = request.protocol
        options.id = stream
        let channel = DataChannel(label: request.label, options: options, id: stream, locallyMade: false, owner: self)
        channel.state.withLock { $0.readyState = .open }
        queued.channels[stream] = channel
        queued.sendQueue.append(Outgoing(kind: .control(stream: stream), bytes: [Self.ackType]))
        let callback = shared.withLock { s in
            s.statistics.channelsOpenedByPeer += 1
            return s.onDataChannel
        }
        callback?(channel)
        channel.announceOpen()
        flushSends()
    }

    private func malformed() { shared.withLock { $0.statistics.malformedControlDropped += 1 } }

    /// What a DATA_CHANNEL_OPEN asks for. Thread rule: a value type.
    package struct OpenRequest: Equatable, Sendable {
        package var ordered: Bool
        package var maxRetransmits: Int?
        package var maxPacketLifeTime: Int?
        package var label: String
        package var `protocol`: String

        package init(
            ordered: Bool, maxRetransmits: Int? = nil, maxPacketLifeTime: Int? = nil, label: String, protocol: String
        ) {
            self.ordered = ordered
            self.maxRetransmits = maxRetransmits
            self.maxPacketLifeTime = maxPacketLifeTime
            self.label = label
            self.protocol = `protocol`
        }
    }

    /// Parses a DATA_CHANNEL_OPEN (RFC 8832 §5.1): type, channel type, priority, reliability
    /// parameter, label and protocol lengths, then both. Nil when it is short, its lengths run
    /// past its end, or its channel type is unknown.
    package static func parseOpen(_ b: UnsafeRawBufferPointer) -> OpenRequest? {
        guard b.count >= 12, b[0] == openType else { return nil }
        let channelType = b[1]
        let parameter = UInt32(b[4]) << 24 | UInt32(b[5]) << 16 | UInt32(b[6]) << 8 | UInt32(b[7])
        let labelLength = Int(b[8]) << 8 | Int(b[9])
        let protocolLength = Int(b[10]) << 8 | Int(b[11])
        guard 12 + labelLength + protocolLength <= b.count else { return nil }
        var r = OpenRequest(
            ordered: channelType & 0x80 == 0, label: String(decoding: b[12..<(12 + labelLength)], as: UTF8.self),
            protocol: String(decoding: b[(12 + labelLength)..<(12 + labelLength + protocolLength)], as: UTF8.self))
        switch channelType & 0x7F {
        case 0x00: break
        case 0x01: r.maxRetransmits = Int(parameter)
        case 0x02: r.maxPacketLifeTime = Int(parameter)
        default: return nil
        }
        return r
    }

    /// The DATA_CHANNEL_OPEN for one of our channels.
    package static func openMessage(_ channel: DataChannel) -> [UInt8] {
        let o = channel.options
        return openMessage(
            OpenRequest(
                ordered: o.ordered, maxRetransmits: o.maxRetransmits, maxPacketLifeTime: o.maxPacketLifeTime,
                label: channel.label, protocol: o.protocol))
    }

    /// The DATA_CHANNEL_OPEN asking for `request` (priority 0). Its reliability parameter must
    /// fit 32 bits and its label and protocol 65,535 bytes each (what `create` checks; a peer's
    /// request parsed by `parseOpen` always fits). Thread rule: any thread. Cost: one array.
    package static func openMessage(_ request: OpenRequest) -> [UInt8] {
        var type: UInt8 = request.ordered ? 0x00 : 0x80
        var parameter: UInt32 = 0
        if let r = request.maxRetransmits {
            type |= 0x01
            parameter = UInt32(r)
        } else if let l = request.maxPacketLifeTime {
            type |= 0x02
            parameter = UInt32(l)
        }
        let label = Array(request.label.utf8), proto = Array(request.protocol.utf8)
        var out: [UInt8] = [openType, type, 0, 0]
        out += [UInt8(parameter >> 24), UInt8(parameter >> 16 & 0xFF), UInt8(parameter >> 8 & 0xFF), UInt8(parameter & 0xFF)]
        out += [UInt8(label.count >> 8), UInt8(label.count & 0xFF), UInt8(proto.count >> 8), UInt8(proto.count & 0xFF)]
        return out + label + proto
    }

    // MARK: Closing

    /// The peer reset its outgoing `stream`: the channel closes (we reset ours too if we have not).
    private func peerReset(_ stream: UInt16) {
        guard let channel = queued.channels[stream] else { return }
        if channel.readyState != .closing {
            queued.sendQueue.append(Outgoing(kind: .reset(channel, stream: stream), bytes: []))
        }
        finish(channel)
        flushSends()
    }

    /// The channel is closed: forgotten, its queued messages dropped, `onClose` told once.
    private func finish(_ channel: DataChannel) {
        if let id = channel.id, queued.channels[id] === channel {
            queued.channels[id] = nil
            queued.awaitingAck.remove(id)
            if queued.partial?.stream == id { queued.partial = nil }
        }
        queued.unassigned.removeAll { $0 === channel }
        let cb = channel.state.withLock { s -> (@Sendable () -> Void)? in
            guard s.readyState != .closed else { return nil }
            s.readyState = .closed
            return s.onClose
        }
        cb?()
    }

    /// On the queue: the connection ended (or the association went down): every channel closes,
    /// the association is aborted, nothing more is sent. Idempotent.
    package func shutdown() {
        guard !queued.shutDown else { return }
        queued.shutDown = true
        shared.withLock { $0.shutDown = true }
        let all = Array(queued.channels.values) + queued.unassigned
        for item in queued.sendQueue[queued.sendHead...] {
            if case .message(let channel, _, let size) = item.kind { release(channel, size) }
        }
        queued.sendQueue.removeAll()
        queued.sendHead = 0
        queued.association = nil
        queued.sendPacket = nil
        queued.up = false
        for channel in all.sorted(by: { ($0.id ?? 0) < ($1.id ?? 0) }) { finish(channel) }
    }
}

extension PeerConnection {
    /// Makes a data channel (W3C `createDataChannel`). An in-band channel (the default) is
    /// announced with DATA_CHANNEL_OPEN once the SCTP association is up; a `negotiated` one opens
    /// then on the `id` both sides agreed. The first channel puts a data section in the next
    /// offer; a channel made after the first exchange without one needs a new offer. Throws
    /// `.invalidOptions` for options that cannot work, `.invalidState` once the connection is
    /// closed. Thread rule: any thread but the connection's callbacks (waits for its queue).
    /// Cost: small.
    package func createDataChannel(label: String, options: DataChannelOptions = DataChannelOptions()) throws(DataChannelError)
        -> DataChannel
    {
        let s = state
        guard s != .closed, s != .failed else { throw .invalidState("the connection is \(s.rawValue)") }
        return try dataChannels.create(label: label, options: options)
    }

    /// Each channel the peer opened in-band, open already (on the connection's queue); set the
    /// channel's `onMessage` and `onClose` inside. Channels the peer opens while this is nil are
    /// open but unseen. Thread rule: any thread. Cost: a lock.
    package var onDataChannel: (@Sendable (DataChannel) -> Void)? {
        get { dataChannels.shared.withLock { $0.onDataChannel } }
        set { dataChannels.shared.withLock { $0.onDataChannel = newValue } }
    }

    /// Counters of the data channels (messages, bytes, drops). Thread rule: any thread. Cost: a lock.
    package var dataChannelStatistics: DataChannelStatistics { dataChannels.shared.withLock { $0.statistics } }

    /// What our descriptions say about data channels.
    var dataChannelParameters: JSEPDataChannelParameters {
        JSEPDataChannelParameters(
            sctpPort: Int(PeerConnectionDataChannels.sctpPort), maxMessageSize: PeerConnectionDataChannels.maxMessageSize)
    }

    /// Whether an offer made now carries a data section: a channel was made, or an earlier
    /// description had one.
    func offersDataChannel(previous: JSEPSessionDescription?) -> Bool {
        dataChannels.shared.withLock { $0.wanted } || previous?.media.contains { $0.isDataChannel && !$0.isRejected } == true
    }

    /// On the queue, when connected after an exchange: starts SCTP if `answer` accepted a data
    /// section and it is not running. The peer's port and message limit come from its description.
    func startDataChannels(answer: JSEPSessionDescription) {
        guard answer.media.contains(where: { $0.isDataChannel && !$0.isRejected }) else { return }
        let (remote, role) = shared.withLock { ($0.signalling.remote, $0.role) }
        guard let role, let section = remote?.media.first(where: { $0.isDataChannel && !$0.isRejected }) else { return }
        let port = UInt16(section.sctpPort ?? JSEPDataChannelParameters.defaultSCTPPort)
        let limit = section.maxMessageSize ?? JSEPDataChannelParameters.defaultMaxMessageSize
        let dtls = self.dtls
        if let reason = dataChannels.start(
            role: role, remotePort: port, remoteMaxMessageSize: limit, send: { dtls.sendApplicationData($0) })
        {
            fail(.setup(reason))
        }
    }
}
