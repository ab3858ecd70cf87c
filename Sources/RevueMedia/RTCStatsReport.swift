// `RTCPeerConnection.getStats()`: a report of W3C webrtc-stats records (inbound-rtp,
// outbound-rtp, remote-inbound-rtp, candidate-pair, local-candidate, remote-candidate,
// transport) with the W3C member names, made from the engine's counters.
import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One member's value in a statistics record. Thread rule: a value type. Cost: none.
public enum RTCStatsValue: Sendable, Hashable {
    /// A count or other integer.
    case int(Int64)
    /// Seconds, ratios and other real numbers.
    case double(Double)
    /// Ids, names, states.
    case string(String)
    /// Flags.
    case bool(Bool)
}

/// The type of a statistics record (W3C `RTCStatsType`, the ones this engine reports).
/// Thread rule: a value type. Cost: none.
public struct RTCStatsType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The W3C name (`inbound-rtp`...).
    public var rawValue: String
    /// A type named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A stream received from the peer.
    public static let inboundRTP = RTCStatsType(rawValue: "inbound-rtp")
    /// A stream sent to the peer.
    public static let outboundRTP = RTCStatsType(rawValue: "outbound-rtp")
    /// What the peer's receiver reports say about a stream we send (loss, jitter, round trip).
    public static let remoteInboundRTP = RTCStatsType(rawValue: "remote-inbound-rtp")
    /// The selected ICE candidate pair.
    public static let candidatePair = RTCStatsType(rawValue: "candidate-pair")
    /// The selected pair's local candidate.
    public static let localCandidate = RTCStatsType(rawValue: "local-candidate")
    /// The selected pair's remote candidate.
    public static let remoteCandidate = RTCStatsType(rawValue: "remote-candidate")
    /// The one ICE/DTLS transport.
    public static let transport = RTCStatsType(rawValue: "transport")
    /// The W3C name.
    public var description: String { rawValue }
}

/// One statistics record: its id, type, time and W3C members (`packetsReceived`, `jitter`...).
/// Thread rule: a value type. Cost: none.
public struct RTCStats: Sendable, Hashable {
    /// Unique within the report; other records refer to it (`transportId`, `localCandidateId`).
    public var id: String
    /// What the record describes.
    public var type: RTCStatsType
    /// When it was taken, milliseconds since 1970 (W3C `DOMHighResTimeStamp`).
    public var timestamp: Double
    /// The members by their W3C names.
    public var members: [String: RTCStatsValue]

    /// A record; `members` by W3C name.
    public init(id: String, type: RTCStatsType, timestamp: Double, members: [String: RTCStatsValue]) {
        self.id = id
        self.type = type
        self.timestamp = timestamp
        self.members = members
    }

    /// The member `name`. Cost: a dictionary lookup.
    public subscript(_ name: String) -> RTCStatsValue? { members[name] }

    /// The member `name` as an integer (nil when absent or not an integer).
    public func int(_ name: String) -> Int64? {
        if case .int(let v)? = members[name] { return v }
        return nil
    }

    /// The member `name` as a real number (integers convert).
    public func double(_ name: String) -> Double? {
        switch members[name] {
        case .double(let v)?: v
        case .int(let v)?: Double(v)
        default: nil
        }
    }

    /// The member `name` as text (nil when absent or not text).
    public func string(_ name: String) -> String? {
        if case .string(let v)? = members[name] { return v }
        return nil
    }
}

/// What `getStats()` returns: every record by id (W3C `RTCStatsReport`).
/// Thread rule: a value type. Cost: none.
public struct RTCStatsReport: Sendable, Hashable {
    /// The records by id.
    public var records: [String: RTCStats]

    /// A report of `records` (keyed by their ids).
    public init(records: [RTCStats]) {
        self.records = Dictionary(records.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The record with `id`. Cost: a dictionary lookup.
    public subscript(_ id: String) -> RTCStats? { records[id] }

    /// The records of `type`, ordered by id. Cost: a scan and a sort of the report.
    public func records(ofType type: RTCStatsType) -> [RTCStats] {
        records.values.filter { $0.type == type }.sorted { $0.id < $1.id }
    }
}

extension RTCPeerConnection {
    /// The connection's statistics now: `inbound-rtp` per received stream (packetsReceived,
    /// bytesReceived, packetsLost, jitter, framesDecoded, framesDropped, frame size, concealed
    /// samples...), `outbound-rtp` per local track (packetsSent and bytesSent as handed to the
    /// network, whole SRTP packets; framesEncoded, keyFramesEncoded, nackCount, pliCount...),
    /// `remote-inbound-rtp` per stream the peer reported on (roundTripTime from RTCP
    /// LSR/DLSR, fractionLost, packetsLost, jitter), the selected `candidate-pair` with its two
    /// candidates (bytes and packets both ways, requestsSent and responsesReceived of the whole
    /// agent, currentRoundTripTime from the latest RTCP round trip: this agent does not time its
    /// STUN checks; availableOutgoingBitrate is our send-side bandwidth estimate, from receiver
    /// reports, REMB and, when negotiated, transport-cc feedback) and the `transport` (ICE and
    /// DTLS state, SRTP cipher). An inbound audio stream's audioLevel is the sender's, from the
    /// RFC 6464 header extension. Before connected it
    /// holds what exists (the transport, outbound counts of zero).
    /// Thread rule: any task. Cost: waits for the connection's queue; a few locks and copies.
    public func getStats() async -> RTCStatsReport {
        let now = Date().timeIntervalSince1970 * 1000
        var out: [RTCStats] = []
        func add(_ id: String, _ type: RTCStatsType, _ m: [String: RTCStatsValue]) {
            out.append(RTCStats(id: id, type: type, timestamp: now, members: m))
        }
        let transportID = "T01"
        var bytesReceived: Int64 = 0, packetsReceived: Int64 = 0
        for s in engine.inboundStats {
            bytesReceived += Int64(clamping: s.bytesReceived + s.headerBytesReceived)
            packetsReceived += Int64(clamping: s.packetsReceived)
            var m: [String: RTCStatsValue] = [
                "ssrc": .int(Int64(s.ssrc)), "kind": .string(s.kind), "transportId": .string(transportID),
                "mimeType": .string("\(s.kind)/\(s.codec)"),
                "packetsReceived": .int(Int64(clamping: s.packetsReceived)),
                "bytesReceived": .int(Int64(clamping: s.bytesReceived)),
                "headerBytesReceived": .int(Int64(clamping: s.headerBytesReceived)),
                "packetsLost": .int(s.packetsLost), "jitter": .double(s.jitter),
                "packetsDiscarded": .int(Int64(clamping: s.packetsDiscarded)),
                "nackCount": .int(Int64(clamping: s.nackCount)),
                "jitterBufferDelay": .double(s.jitterBufferDelay),
                "jitterBufferEmittedCount": .int(Int64(clamping: s.jitterBufferEmittedCount)),
            ]
            if s.kind == "video" {
                m["framesReceived"] = .int(Int64(clamping: s.framesReceived))
                m["framesDecoded"] = .int(Int64(clamping: s.framesDecoded))
                m["keyFramesDecoded"] = .int(Int64(clamping: s.keyFramesDecoded))
                m["framesDropped"] = .int(Int64(clamping: s.framesDropped))
                m["frameWidth"] = .int(Int64(s.frameWidth))
                m["frameHeight"] = .int(Int64(s.frameHeight))
                m["freezeCount"] = .int(Int64(clamping: s.freezeCount))
                m["totalFreezesDuration"] = .double(s.totalFreezesDuration)
                m["pliCount"] = .int(Int64(clamping: s.pliCount))
                m["firCount"] = .int(Int64(clamping: s.firCount))
            } else {
                m["totalSamplesReceived"] = .int(Int64(clamping: s.totalSamplesReceived))
                m["concealedSamples"] = .int(Int64(clamping: s.concealedSamples))
                m["concealmentEvents"] = .int(Int64(clamping: s.concealmentEvents))
                m["audioLevel"] = .double(s.audioLevel)
            }
            add("IT-\(s.kind)-\(s.ssrc)", .inboundRTP, m)
        }
        var bytesSent: Int64 = 0, packetsSent: Int64 = 0
        var kindBySSRC: [UInt32: String] = [:]
        for t in engine.trackReports {
            let o = t.outbound
            let kind = t.kind == .video ? "video" : "audio"
            kindBySSRC[o.ssrc] = kind
            bytesSent += Int64(t.bytesSent)
            packetsSent += Int64(t.packetsSent)
            var m: [String: RTCStatsValue] = [
                "ssrc": .int(Int64(o.ssrc)), "kind": .string(kind), "transportId": .string(transportID),
                "packetsSent": .int(Int64(t.packetsSent)), "bytesSent": .int(Int64(t.bytesSent)),
                "retransmittedPacketsSent": .int(Int64(clamping: o.retransmittedPacketsSent)),
                "nackCount": .int(Int64(clamping: o.nackCount)),
                "framesEncoded": .int(Int64(clamping: o.framesEncoded)),
            ]
            if let mid = t.mid { m["mid"] = .string(mid) }
            if t.kind == .video {
                m["keyFramesEncoded"] = .int(Int64(clamping: o.keyFramesEncoded))
                m["frameWidth"] = .int(Int64(o.frameWidth))
                m["frameHeight"] = .int(Int64(o.frameHeight))
                m["framesPerSecond"] = .double(o.framesPerSecond)
                m["targetBitrate"] = .double(o.targetBitrate)
                m["totalEncodeTime"] = .double(o.totalEncodeTime)
                m["qpSum"] = .int(Int64(clamping: o.qpSum))
                m["pliCount"] = .int(Int64(clamping: o.pliCount))
                m["firCount"] = .int(Int64(clamping: o.firCount))
            }
            add("OT-\(kind)-\(o.ssrc)", .outboundRTP, m)
        }
        var latestRTT: Double?
        for r in engine.remoteInboundStats where r.roundTripTimeMeasurements > 0 || r.packetsLost != 0 {
            let kind = kindBySSRC[r.ssrc] ?? "unknown"
            if r.roundTripTimeMeasurements > 0 { latestRTT = r.roundTripTime }
            add(
                "RI-\(kind)-\(r.ssrc)", .remoteInboundRTP,
                [
                    "ssrc": .int(Int64(r.ssrc)), "kind": .string(kind), "transportId": .string(transportID),
                    "localId": .string("OT-\(kind)-\(r.ssrc)"), "roundTripTime": .double(r.roundTripTime),
                    "totalRoundTripTime": .double(r.totalRoundTripTime),
                    "roundTripTimeMeasurements": .int(Int64(clamping: r.roundTripTimeMeasurements)),
                    "fractionLost": .double(r.fractionLost), "packetsLost": .int(r.packetsLost), "jitter": .double(r.jitter),
                ])
        }
        let ice = engine.iceStatistics
        var transport: [String: RTCStatsValue] = [
            "bytesSent": .int(bytesSent), "bytesReceived": .int(bytesReceived),
            "packetsSent": .int(packetsSent), "packetsReceived": .int(packetsReceived),
            "iceState": .string(iceConnectionState.rawValue),
            "dtlsState": .string(Self.dtlsState(connectionState)),
            "selectedCandidatePairChanges": .int(Int64(ice?.selectedPairChanges ?? 0)),
        ]
        if let suite = engine.srtpSuite { transport["srtpCipher"] = .string(suite.rawValue) }
        if let pair = engine.selectedCandidatePair {
            let localID = "CL-\(pair.local.foundation)-\(pair.local.address)"
            let remoteID = "CR-\(pair.remote.foundation)-\(pair.remote.address)"
            let pairID = "CP-\(localID)_\(remoteID)"
            transport["selectedCandidatePairId"] = .string(pairID)
            var m: [String: RTCStatsValue] = [
                "transportId": .string(transportID), "localCandidateId": .string(localID),
                "remoteCandidateId": .string(remoteID), "state": .string("succeeded"), "nominated": .bool(true),
                "bytesSent": .int(bytesSent), "bytesReceived": .int(bytesReceived),
                "packetsSent": .int(packetsSent), "packetsReceived": .int(packetsReceived),
                "requestsSent": .int(Int64(ice?.checksSent ?? 0)),
                "responsesReceived": .int(Int64(ice?.responsesReceived ?? 0)),
                "requestsReceived": .int(Int64(ice?.checksAnswered ?? 0)),
            ]
            if let latestRTT { m["currentRoundTripTime"] = .double(latestRTT) }
            if let estimate = engine.sendBandwidthEstimate { m["availableOutgoingBitrate"] = .double(Double(estimate)) }
            add(pairID, .candidatePair, m)
            for (id, type, c) in [(localID, RTCStatsType.localCandidate, pair.local), (remoteID, .remoteCandidate, pair.remote)] {
                add(
                    id, type,
                    [
                        "transportId": .string(transportID), "address": .string(c.address.host),
                        "port": .int(Int64(c.address.port)), "protocol": .string("udp"),
                        "candidateType": .string(c.type.rawValue), "priority": .int(Int64(c.priority)),
                        "foundation": .string(c.foundation),
                    ])
            }
        }
        add(transportID, .transport, transport)
        return RTCStatsReport(records: out)
    }

    /// The W3C `RTCDtlsTransportState` this engine's connection state implies.
    static func dtlsState(_ s: RTCPeerConnectionState) -> String {
        switch s {
        case .new: "new"
        case .connecting: "connecting"
        case .connected, .disconnected: "connected"
        case .failed: "failed"
        case .closed: "closed"
        }
    }
}
