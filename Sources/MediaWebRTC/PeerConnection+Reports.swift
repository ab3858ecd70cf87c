import MediaBase
import MediaTransport
// What a PeerConnection tells a wrapper beyond its media: when gathering ends, when the selected
// ICE pair changes, receive-only sections of its own, and the counters a W3C statistics report
// is made of (the selected pair, the agent's checks, each local track's traffic, the peer's
// receiver reports).
import Synchronization

/// One local track's counters, for a statistics report. Thread rule: a value type. Cost: none.
package struct PeerConnectionTrackReport: Sendable {
    /// `.audio` or `.video`.
    package var kind: JSEPMediaKind
    /// The track id (the msid's track part).
    package var id: String
    /// The mid of its section, once a description gave it one.
    package var mid: String?
    /// SRTP packets and bytes handed to the network, and packets dropped before keys or a route.
    package var packetsSent: Int, bytesSent: Int, dropped: Int
    /// The send stream's W3C record (frames encoded, NACK/PLI counts...).
    package var outbound: OutboundRTPStreamStats
    /// The capturer's count of buffers taken and dropped.
    package var capture: CaptureStats
}

extension PeerConnection {
    /// Called once when ICE gathering has finished (after the last `onLocalCandidate`), on the
    /// connection's queue. Set before the first `createOffer`/`setRemoteDescription`.
    package var onGatheringComplete: (@Sendable () -> Void)? {
        get { shared.withLock { $0.onGatheringComplete } }
        set { shared.withLock { $0.onGatheringComplete = newValue } }
    }

    /// Called on the connection's queue when the ICE agent selects a pair (`true`) or loses its
    /// selected pair (`false`, consent expired).
    package var onSelectedPairChange: (@Sendable (_ selected: Bool) -> Void)? {
        get { shared.withLock { $0.onSelectedPairChange } }
        set { shared.withLock { $0.onSelectedPairChange = newValue } }
    }

    /// Whether gathering has finished. Thread rule: any thread. Cost: a lock.
    package var isGatheringComplete: Bool { shared.withLock { $0.gatheringComplete } }

    /// Adds a section of `kind` that only receives (`a=recvonly`, no local track) to the offers
    /// this side makes, with mid `r` + a number; returns the mid. Before the first description
    /// or between exchanges. Thread rule: any thread. Cost: a lock.
    package func addReceiveOnlySection(kind: JSEPMediaKind) throws(PeerConnectionError) -> String {
        try shared.withLock { s throws(PeerConnectionError) -> String in
            guard s.state != .failed, s.state != .closed else { throw .invalidState("the connection is \(s.state.rawValue)") }
            guard s.signalling.state == .stable else { throw .invalidState("an exchange is under way") }
            let mid = "r\(s.receiveOnly.count)"
            var t = JSEPTrack(
                kind: kind, id: "recv-" + ICEAgent.randomICEString(6), streamID: streamID, ssrc: 0, direction: .recvonly)
            t.mid = mid
            s.receiveOnly.append(t)
            return mid
        }
    }

    /// The ICE agent's selected pair (nil before one is selected). Thread rule: any thread. Cost: a lock.
    package var selectedCandidatePair: (local: ICECandidate, remote: ICECandidate)? { agent?.selectedPair }

    /// The ICE agent's counters (checks sent and answered...); nil before the agent exists.
    /// Thread rule: any thread. Cost: a lock and a copy.
    package var iceStatistics: ICEAgentStatistics? { agent?.statistics }

    /// The local ICE candidates gathered so far. Thread rule: any thread. Cost: a lock and a copy.
    package var localCandidates: [ICECandidate] { agent?.localCandidates ?? [] }

    /// What the peer's receiver reports said about each local stream (nil feedback before
    /// connected: empty). Thread rule: any thread but the connection's callbacks (waits for its
    /// queue). Cost: two locks and a copy.
    package var remoteInboundStats: [RemoteInboundRTPStreamStats] {
        var out: [RemoteInboundRTPStreamStats] = []
        onQueue { out = self.feedback?.remoteInbound ?? [] }
        return out
    }

    /// The counters of every live local track. Thread rule: any thread. Cost: a few locks per track.
    package var trackReports: [PeerConnectionTrackReport] {
        let (tracks, mids) = shared.withLock { ($0.tracks, $0.mids) }
        return tracks.map { t in
            let traffic = t.sender.traffic
            let outbound: OutboundRTPStreamStats
            let capture: CaptureStats
            if let v = t.video {
                let s = v.statistics
                (outbound, capture) = (s.outbound, s.capture)
            } else if let a = t.audio {
                let s = a.statistics
                (outbound, capture) = (s.outbound, s.capture)
            } else {
                (outbound, capture) = (OutboundRTPStreamStats(), CaptureStats())
            }
            return PeerConnectionTrackReport(
                kind: t.jsep.kind, id: t.jsep.id, mid: mids[t.jsep.id], packetsSent: traffic.packets,
                bytesSent: traffic.bytes, dropped: traffic.dropped, outbound: outbound, capture: capture)
        }
    }

    /// The id of the live local track whose capturer is `capturer` (nil: not a live track).
    /// Thread rule: any thread. Cost: a lock.
    package func trackID(of capturer: AnyObject) -> String? {
        shared.withLock { $0.tracks.first { $0.capturer === capturer }?.jsep.id }
    }
}
