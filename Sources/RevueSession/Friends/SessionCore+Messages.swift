// The reliable, ordered friend-message stream: queue, window, retransmission, receipts, in-order
// delivery to the App (each message saved before its receipt), reserved SDK messages, profiles.
import Dispatch
internal import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

extension SessionCore {
    func sendMessage(friendId: String, message: String, timeout: Duration) async -> Result<UInt32, FriendMessageError> {
        let body = Array(message.utf8)
        guard let f = friends[friendId] else { return .failure(.friendNotFound) }
        guard body.count <= Self.maxMessageLength else { return .failure(.messageTooLong) }
        guard f.isConnected else { return .failure(.friendNotReachable) }
        guard f.queuedMessages < Self.sendQueueCapacity else { return .failure(.sendQueueFull) }
        let messageId = nextMessageId
        nextMessageId = nextMessageId == UInt32.max ? 1 : nextMessageId + 1
        enqueue(f, kind: .message, body: body, messageId: messageId)
        let deadline = scheduler.now + min(.seconds(30), max(.seconds(5), timeout))
        return await withCheckedContinuation { c in
            f.waiters[messageId] = MessageWaiter(continuation: c, deadline: deadline)
        }
    }

    func enqueue(_ f: FriendState, kind: ReliableKind, body: [UInt8], messageId: UInt32?, stillWanted: (() -> Bool)? = nil) {
        f.outbound.append(OutboundItem(seq: f.nextSeq, kind: kind, body: body, messageId: messageId, stillWanted: stillWanted))
        f.nextSeq &+= 1
        pumpOutbound(f, now: scheduler.now)
    }

    /// Queues our profile for a friend. At most two profile items wait per friend: a newer profile
    /// replaces one queued but never sent, and while two wait (a friend that never acknowledges)
    /// the newest is sent once one is acknowledged, so reconnect cycles cannot grow the queue.
    func enqueueProfile(_ f: FriendState) {
        var w = ByteWriter()
        w.u8(profile.status)
        let name = Self.utf8Prefix(profile.name, maxBytes: 512)
        w.u16(UInt16(name.count))
        w.append(name)
        w.append(Self.utf8Prefix(profile.statusMessage, maxBytes: 512))
        let queued = f.outbound.indices.filter { f.outbound[$0].kind == .profile }
        if let last = queued.last, f.outbound[last].lastSent == nil {
            let old = f.outbound[last]
            f.outbound[last] = OutboundItem(seq: old.seq, kind: .profile, body: w.bytes, messageId: nil)
            return
        }
        if queued.count >= 2 {
            // Both may have arrived already: send the newest once an acknowledgement makes room.
            f.profileDirty = true
            return
        }
        enqueue(f, kind: .profile, body: w.bytes, messageId: nil)
    }

    /// The longest prefix of whole characters of `text` within `maxBytes` UTF-8 bytes (never half
    /// a character or half a grapheme cluster).
    static func utf8Prefix(_ text: String, maxBytes: Int) -> [UInt8] {
        guard text.utf8.count > maxBytes else { return Array(text.utf8) }
        var bytes: [UInt8] = []
        for c in text {
            let u = c.utf8
            guard bytes.count + u.count <= maxBytes else { break }
            bytes.append(contentsOf: u)
        }
        return bytes
    }

    /// Sends items of the window that were never sent or whose retransmission time came.
    func pumpOutbound(_ f: FriendState, now: MonotonicTime) {
        guard f.isConnected else { return }
        for i in f.outbound.indices.prefix(Self.sendWindow) where now.since(f.outbound[i].lastSent) >= timeouts.retransmitInterval
        {
            if f.outbound[i].lastSent != nil, let wanted = f.outbound[i].stillWanted, !wanted() {
                // Its sequence number stays (the stream has no gaps); its meaning is gone. A friend
                // that restarted before acknowledging it gets nothing to act on.
                f.outbound[i].body = Self.withdrawnReserved
                f.outbound[i].stillWanted = nil
            }
            let item = f.outbound[i]
            var w = ByteWriter(capacity: item.body.count + 16)
            w.u8(FrameType.reliable.rawValue)
            w.u32(streamEpoch)
            w.u32(item.seq)
            w.u8(item.kind.rawValue)
            w.append(item.body)
            sendFrame(f, w.bytes)
            f.outbound[i].lastSent = now
        }
    }

    func handleReliable(_ f: FriendState, epoch: UInt32, seq: UInt32, kind: ReliableKind, body: [UInt8]) {
        if epoch != f.stored.inboundEpoch {
            f.stored.inboundEpoch = epoch
            f.stored.inboundDelivered = 0
            f.inboundReceived = 0
            f.inboundAckable = 0
            f.inboundBuffer = [:]
            f.deliveryQueue = []
            f.delivering = false
            f.deliveryGeneration += 1
        }
        let received = f.inboundReceived
        if seq <= received {
            counters.duplicatesSuppressed += 1
        } else if seq - f.inboundAckable <= Self.inboundWindow {
            // Counted from what the App has and the disk holds, not from what arrived: received
            // items waiting for delivery or reordering stay under `inboundWindow`.
            if f.inboundBuffer[seq] != nil { counters.duplicatesSuppressed += 1 }
            f.inboundBuffer[seq] = (kind, body)
            while let (k, b) = f.inboundBuffer.removeValue(forKey: f.inboundReceived + 1) {
                f.inboundReceived += 1
                f.deliveryQueue.append((f.inboundReceived, k, b))
            }
            pumpDelivery(f)
        }
        sendAck(f, epoch: epoch, seq: f.inboundAckable)
    }

    /// Hands the next received item to the App, then saves the stream position, then sends the
    /// receipt, then goes on with the next item. So a receipt means the App had the message and
    /// the position is on disk; a crash can at most deliver the one message in that window again
    /// after the restart, and never loses one.
    ///
    /// The SDK's own messages (call signals) are not held for the disk: each is handled at once and
    /// the next item follows without waiting for its save, so a call's setup does not pay one
    /// fsync per signal. Their receipts still wait for a save that covers them (coalesced), so a
    /// receipt still means "on disk"; a crash can replay the unsaved ones to the next run, which
    /// has no call for them (see `sendReserved(friendId:text:stillWanted:)`).
    func pumpDelivery(_ f: FriendState) {
        while !f.delivering, !f.deliveryQueue.isEmpty {
            let item = f.deliveryQueue.removeFirst()
            let epoch = f.stored.inboundEpoch, generation = f.deliveryGeneration
            if item.kind == .message, deliverReserved(f, item.body) {
                afterEvents { [weak self, weak f] in
                    guard let self, let f, self.friends[f.id] === f, f.deliveryGeneration == generation,
                        !self.environment.faults.withholdReceipts
                    else { return }
                    f.stored.inboundDelivered = max(f.stored.inboundDelivered, item.seq)
                    self.saveSoon { [weak self, weak f] ok in
                        guard ok, let self, let f, self.isCurrent, f.deliveryGeneration == generation else { return }
                        f.inboundAckable = max(f.inboundAckable, item.seq)
                        self.sendAck(f, epoch: epoch, seq: f.inboundAckable)
                    }
                }
                continue
            }
            f.delivering = true
            if item.kind == .profile { applyProfile(f, item.body) } else { deliverMessage(f, item.body) }
            afterEvents { [weak self, weak f] in
                guard let self, let f, self.friends[f.id] === f, f.deliveryGeneration == generation else { return }
                if self.environment.faults.withholdReceipts {
                    f.delivering = false
                    self.pumpDelivery(f)
                    return
                }
                f.stored.inboundDelivered = max(f.stored.inboundDelivered, item.seq)
                self.saveSoon { [weak self, weak f] ok in
                    guard let self, let f, self.isCurrent, f.deliveryGeneration == generation else { return }
                    f.delivering = false
                    if ok {
                        f.inboundAckable = max(f.inboundAckable, item.seq)
                        self.sendAck(f, epoch: epoch, seq: f.inboundAckable)
                    }
                    self.pumpDelivery(f)
                }
            }
        }
    }

    func sendAck(_ f: FriendState, epoch: UInt32, seq: UInt32) {
        var w = ByteWriter()
        w.u8(FrameType.ack.rawValue)
        w.u32(epoch)
        w.u32(seq)
        sendFrame(f, w.bytes)
    }

    /// Hands an SDK message to the call layer; false (nothing done) when it is the App's.
    func deliverReserved(_ f: FriendState, _ body: [UInt8]) -> Bool {
        let reserved = reservedMessageHandler.map { $0(f.id, body) } ?? Self.isReserved(body)
        if reserved { counters.reservedMessagesSwallowed += 1 }
        return reserved
    }

    /// Hands an App message to the delegates (`deliverReserved` has ruled out the SDK's own).
    func deliverMessage(_ f: FriendState, _ body: [UInt8]) {
        let text = String(decoding: body, as: UTF8.self)
        let id = f.id
        emit { $1.revue($0, friend: id, didReceiveMessage: text) }
    }

    /// Sends one of the SDK's own messages (a JSON object whose "type" is msg, adr or track) on the
    /// friend's reliable stream, outside the App's send queue; false when the friend is unknown,
    /// offline, or already has `reservedQueueCapacity` of them unacknowledged. For the call layer.
    /// `stillWanted`, when given, is asked before every retransmission (not the first sending): once it answers false the
    /// message is replaced by `withdrawnReserved` (the receiver's crash can replay an unacknowledged
    /// message, and an invitation answered meanwhile must not ring again). Cost: one closure call
    /// per retransmission.
    @discardableResult
    func sendReserved(friendId: String, text: String, stillWanted: (() -> Bool)? = nil) -> Bool {
        guard let f = friends[friendId], f.isConnected,
            f.outbound.count(where: { $0.kind == .message && $0.messageId == nil }) < Self.reservedQueueCapacity
        else { return false }
        enqueue(f, kind: .message, body: Array(text.utf8), messageId: nil, stillWanted: stillWanted)
        return true
    }

    /// What a withdrawn SDK message carries: a reserved message with an operation no receiver acts on.
    static let withdrawnReserved = Array(#"{"op":"withdrawn","type":"msg"}"#.utf8)

    /// Whether a message is one of the SDK's own: a JSON object whose "type" is msg, adr or track.
    static func isReserved(_ body: [UInt8]) -> Bool {
        guard let first = body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), first == UInt8(ascii: "{"),
            let tagged = try? JSONDecoder().decode(TypeTag.self, from: Data(body))
        else { return false }
        return reservedTypes.contains(tagged.type)
    }

    /// The one member `isReserved` reads: a JSON object's string `type` (other members ignored).
    private struct TypeTag: Decodable {
        let type: String
    }

    /// The `type`s that make a JSON object one of the SDK's own messages.
    static let reservedTypes: Set<String> = ["msg", "adr", "track"]

    func applyProfile(_ f: FriendState, _ body: [UInt8]) {
        var r = ByteReader(body)
        guard let status = r.u8(), let n = r.u16(), let nameBytes = r.take(Int(n)) else { return }
        let name = String(decoding: nameBytes, as: UTF8.self)
        let statusMessage = String(decoding: r.rest(), as: UTF8.self)
        let id = f.id
        if name != f.stored.name {
            f.stored.name = name
            emit { $1.revue($0, friend: id, didUpdateName: name) }
            profileObserver?(id, .name)
        }
        if statusMessage != f.stored.statusMessage {
            f.stored.statusMessage = statusMessage
            emit { $1.revue($0, friend: id, didUpdateStatusMessage: statusMessage) }
            profileObserver?(id, .statusMessage)
        }
        if status != f.stored.status, let s = UserStatus(rawValue: status) {
            f.stored.status = status
            emit { $1.revue($0, friend: id, didUpdateStatus: s) }
            profileObserver?(id, .status)
        }
    }

    func handleAck(_ f: FriendState, epoch: UInt32, seq: UInt32) {
        guard epoch == streamEpoch else { return }
        while let first = f.outbound.first, first.seq <= seq {
            f.outbound.removeFirst()
            if let mid = first.messageId, let w = f.waiters.removeValue(forKey: mid) {
                w.continuation.resume(returning: .success(mid))
            }
        }
        if f.profileDirty, f.outbound.count(where: { $0.kind == .profile }) < 2 {
            f.profileDirty = false
            enqueueProfile(f)
        }
    }
}
