// A full ICE agent (RFC 8445) for one UDP socket and one component: gathering (host, server
// reflexive, relayed), paced connectivity checks, nomination, consent freshness (RFC 7675) and
// failover, speaking standard STUN on the wire so browsers and servers can be its peers.
import Dispatch
import Foundation
import Synchronization

/// Settings of an `ICEAgent`. Thread rule: a value type.
package struct ICEAgentConfiguration: Sendable {
    /// STUN and TURN servers to gather from.
    package var servers: [ICEServer] = []
    /// The controlling agent nominates (RFC 8445 §6.1.1); the other is controlled.
    package var controlling: Bool
    /// Host addresses to offer; nil: every up, non-loopback interface address of the socket's
    /// family (loopback too when the socket is bound to loopback).
    package var hostAddresses: [SocketAddress]? = nil
    /// Ta, the pacing of new checks (RFC 8445 §14.2), milliseconds.
    package var checkIntervalMilliseconds = 50
    /// How often every valid pair is checked again (liveness and consent, RFC 7675 §5.1),
    /// milliseconds; each interval is drawn from 0.8...1.2 times it.
    package var keepaliveIntervalMilliseconds = 250
    /// A selected pair with no answer for this long fails over to the next working pair.
    package var failoverAfterMilliseconds = 1000
    /// RFC 7675 §5.1: with no consent on any pair for this long, media stops.
    package var consentExpirySeconds: Double = 30
    /// Most remote candidates kept (more are dropped and counted).
    package var maxRemoteCandidates = 32
    /// Most candidate pairs kept (RFC 8445 §6.1.2.5 suggests 100).
    package var maxPairs = 100
    /// Binding requests answered per second (bursts of twice this); the rest are dropped and counted.
    package var bindingRequestsPerSecond = 200

    package init(controlling: Bool) { self.controlling = controlling }
}

/// Counters of an agent. Thread rule: a value type.
package struct ICEAgentStatistics: Sendable, Equatable {
    package var checksSent = 0
    package var checksAnswered = 0
    package var responsesReceived = 0
    /// Responses with no matching transaction, a bad MESSAGE-INTEGRITY or FINGERPRINT, or from
    /// the wrong address: dropped, never changing any pair.
    package var droppedResponses = 0
    /// Requests with a bad username, MESSAGE-INTEGRITY or FINGERPRINT: dropped.
    package var droppedRequests = 0
    /// Requests over the rate limit, or whose answer would be larger than them: dropped.
    package var rateLimitedRequests = 0
    package var droppedRemoteCandidates = 0
    /// Times the selected pair changed.
    package var selectedPairChanges = 0
}

/// One ICE agent (see the file comment). Thread rule: every method from any thread; callbacks
/// run on the agent's private queue, one at a time. Cost: a few STUN transactions per pair per
/// second; nothing on the media path but `path`.
package final class ICEAgent: @unchecked Sendable {
    package let configuration: ICEAgentConfiguration
    /// Our ufrag (4+ characters) and password (22+ characters), random (RFC 8445 §5.3).
    package let localUfrag: String
    package let localPassword: String
    /// The route media takes now; the agent updates it as pairs are selected or fail.
    package let path = ICESendPath()

    /// `socket`: the bound UDP socket every check and all media use; its datagrams that are not
    /// RTP/RTCP must reach `handleDatagram`.
    package init(socket: UDPSocket, configuration: ICEAgentConfiguration) {
        self.configuration = configuration
        localUfrag = ""
        localPassword = ""
    }

    /// Each local candidate as it is gathered (trickle, RFC 8838).
    package var onCandidate: (@Sendable (ICECandidate) -> Void)?
    /// Gathering finished (every server answered or timed out).
    package var onGatheringComplete: (@Sendable () -> Void)?
    /// The selected pair changed (nil: no working pair).
    package var onSelectedPairChange: (@Sendable (_ local: ICECandidate?, _ remote: ICECandidate?) -> Void)?
    /// RTP/RTCP that arrived through a TURN relay other than as UDP ChannelData (TCP, or Data
    /// indications), unwrapped, for the receive pipeline.
    package var onRelayedMedia: (@Sendable (UnsafeRawBufferPointer) -> Void)?

    /// Starts gathering (host candidates at once) and, once remote credentials are set, checks.
    package func start() {}

    package func setRemoteCredentials(ufrag: String, password: String) {}

    package func addRemoteCandidate(_ candidate: ICECandidate) {}

    /// A datagram from the socket that is not RTP/RTCP (STUN, TURN ChannelData/control).
    package func handleDatagram(_ bytes: UnsafeRawBufferPointer, from: SocketAddress) {}

    package var localCandidates: [ICECandidate] { [] }
    package var selectedPair: (local: ICECandidate, remote: ICECandidate)? { nil }
    package var statistics: ICEAgentStatistics { ICEAgentStatistics() }

    /// Reads the socket on the agent's queue (before a receive pipeline takes it over, and in
    /// tests): STUN/TURN datagrams to `handleDatagram`, the rest to `otherDatagram`.
    package func startReading(otherDatagram: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Void)? = nil) {}

    /// Stops `startReading`'s reader (the socket stays open).
    package func stopReading() {}

    /// Stops checks and timers and releases TURN allocations. Idempotent.
    package func close() {}
}
