import MediaTransport
import Synchronization

/// SRTP keys and the negotiated payload type handed to a send stream that is already running: a
/// WebRTC connection makes its streams before DTLS has exported keys or the answer has fixed the
/// payload types. The stream's egress takes the context with its next packet and from then on
/// rewrites the payload type and protects in place, exactly as a stream made with keys does (no
/// copy); until then its packets are unprotected, and the sink must not send them (`adopted`).
///
/// Thread rule: `provide`/`setPayloadType` from any thread; the rest is read by the stream's
/// egress thread (the worker, or the pacer's thread) and by the sink. Cost: one atomic load per
/// packet once adopted; a lock per packet only until then.
package final class LateSendProtection: Sendable {
    private let context = Mutex<SRTPContextBox?>(nil)
    private let hasContext = Atomic<Bool>(false)
    /// The payload type packets leave with, once set.
    private let payloadTypeSlot = Atomic<UInt8>(0)
    /// The RFC 4588 retransmission payload type the peer accepted for it (bit 7 set when there
    /// is one; 0: none, retransmissions are not sent).
    private let retransmissionPayloadTypeSlot = Atomic<UInt8>(0)
    /// Set by the egress thread before it writes its first protected packet; packets written to
    /// the sink before that are unprotected.
    private let adoptedFlag = Atomic<Bool>(false)
    /// The negotiated header extension IDs (`NegotiatedHeaderExtensionIDs.packed`); 0: none sent.
    private let extensionIDSlot = Atomic<UInt32>(0)
    /// The stream's mid (RFC 8843), 1-4 bytes in the low bytes first, zero after it; 0: none.
    private let midSlot = Atomic<UInt32>(0)
    /// The ID under which the stream reserves a 4-byte element for the mid (RFC 9143 §15's
    /// `sdes:mid`); nil: the stream carries none.
    package let midReservedID: UInt8?

    /// A slot with nothing in it yet; `midReservedID` makes the stream keep room for its mid.
    package init(midReservedID: UInt8? = nil) { self.midReservedID = midReservedID }

    /// Gives the stream its SRTP context (the first call only; later contexts are ignored, so a
    /// stream keeps its rollover counter across renegotiations) and the payload type to send with.
    /// `retransmissionPayloadType`: the RTX payload type the peer accepted with it (nil: none).
    package func provide(context: SRTPContext, payloadType: UInt8, retransmissionPayloadType: UInt8? = nil) {
        setPayloadType(payloadType, retransmissionPayloadType: retransmissionPayloadType)
        self.context.withLock { slot in
            if slot == nil { slot = SRTPContextBox(context: context) }
        }
        hasContext.store(true, ordering: .releasing)
    }

    /// Changes the payload type packets leave with (a renegotiation that mapped the codec anew),
    /// and the RTX payload type the peer accepted for it (RFC 4588 `apt=`; nil: none, and a
    /// stream made with an RTX SSRC then neither retransmits nor pads).
    package func setPayloadType(_ payloadType: UInt8, retransmissionPayloadType: UInt8? = nil) {
        payloadTypeSlot.store(payloadType & 0x7F, ordering: .relaxed)
        retransmissionPayloadTypeSlot.store(retransmissionPayloadType.map { 0x80 | ($0 & 0x7F) } ?? 0, ordering: .relaxed)
    }

    /// The RTX payload type last set (nil: none). Thread rule: any thread. Cost: one atomic load.
    package var retransmissionPayloadType: UInt8? {
        let v = retransmissionPayloadTypeSlot.load(ordering: .relaxed)
        return v == 0 ? nil : v & 0x7F
    }

    /// Sets the RFC 8285 IDs the peer gave the header extensions this stream reserves (the
    /// answer of the latest exchange); an element whose ID is 0 or above 14 leaves as padding
    /// bytes, so the peer never sees an extension it did not accept. Until the first call none
    /// is sent. Thread rule: any thread; the egress uses the new IDs from its next packet.
    /// Cost: one atomic store.
    package func setExtensionIDs(_ ids: NegotiatedHeaderExtensionIDs) {
        extensionIDSlot.store(ids.packed, ordering: .relaxed)
    }

    /// The stream's mid (its m-section's `a=mid`), written into the reserved element once the
    /// mid extension is negotiated. A mid longer than 4 bytes (or nil) is not sent: the element
    /// leaves as padding. Thread rule: any thread; the egress uses it from its next packet. Cost:
    /// one atomic store.
    package func setMid(_ mid: String?) {
        let bytes = Array((mid ?? "").utf8)
        guard (1...4).contains(bytes.count), !bytes.contains(0) else { return midSlot.store(0, ordering: .relaxed) }
        var packed: UInt32 = 0
        for (i, b) in bytes.enumerated() { packed |= UInt32(b) << (8 * i) }
        midSlot.store(packed, ordering: .relaxed)
    }

    /// The mid set last, packed as `setMid` stores it. Egress thread. Cost: one atomic load.
    var midBytes: UInt32 { midSlot.load(ordering: .relaxed) }

    /// The IDs last set. Thread rule: any thread. Cost: one atomic load.
    package var extensionIDs: NegotiatedHeaderExtensionIDs {
        NegotiatedHeaderExtensionIDs(packed: extensionIDSlot.load(ordering: .relaxed))
    }

    /// Whether the stream protects its packets now (the sink may send what it is given).
    package var adopted: Bool { adoptedFlag.load(ordering: .acquiring) }

    /// The payload type to write into each packet. Egress thread.
    var payloadType: UInt8 { payloadTypeSlot.load(ordering: .relaxed) }

    /// The context, once provided; the egress thread calls `markAdopted` when it uses it.
    func takeContext() -> SRTPContext? {
        guard hasContext.load(ordering: .acquiring) else { return nil }
        return context.withLock { $0?.context }
    }

    func markAdopted() { adoptedFlag.store(true, ordering: .releasing) }
}

/// An SRTP context handed from the thread that made it to the egress thread, which owns it from
/// then on. Thread rule: immutable.
struct SRTPContextBox: Sendable {
    let context: SRTPContext
}

/// The RFC 8285 IDs a WebRTC peer gave the header extensions a send stream can carry (its
/// answer's, or the offer's when we answered). 0 means "not negotiated": the stream leaves that
/// element out (as padding bytes). Only one-byte IDs (1-14) are written; a larger one counts as
/// not negotiated. Thread rule: a value type. Cost: none.
package struct NegotiatedHeaderExtensionIDs: Sendable, Hashable {
    /// RFC 6464 client-to-mixer audio level (`urn:ietf:params:rtp-hdrext:ssrc-audio-level`).
    package var audioLevel: UInt8 = 0
    /// abs-send-time (`http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time`).
    package var absSendTime: UInt8 = 0
    /// Transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01).
    package var transportSequence: UInt8 = 0
    /// The media section's identification (`urn:ietf:params:rtp-hdrext:sdes:mid`, RFC 8843).
    package var mid: UInt8 = 0

    /// IDs given explicitly (0: not negotiated).
    package init(audioLevel: UInt8 = 0, absSendTime: UInt8 = 0, transportSequence: UInt8 = 0, mid: UInt8 = 0) {
        self.audioLevel = audioLevel
        self.absSendTime = absSendTime
        self.transportSequence = transportSequence
        self.mid = mid
    }

    /// The four IDs in one word (for an atomic slot).
    var packed: UInt32 {
        UInt32(audioLevel) | UInt32(absSendTime) << 8 | UInt32(transportSequence) << 16 | UInt32(mid) << 24
    }

    init(packed: UInt32) {
        audioLevel = UInt8(truncatingIfNeeded: packed)
        absSendTime = UInt8(truncatingIfNeeded: packed >> 8)
        transportSequence = UInt8(truncatingIfNeeded: packed >> 16)
        mid = UInt8(truncatingIfNeeded: packed >> 24)
    }
}
