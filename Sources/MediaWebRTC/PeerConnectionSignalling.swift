// The offer/answer state of one connection (RFC 8829, the W3C signalling states) as a value: the
// descriptions in force, whose turn it is, and the ICE restarts asked for or offered. No
// transport and no threads: `PeerConnection` keeps one under its lock, asks it before each step
// and acts on what the step returns (start the transport, renegotiate, restart ICE).

/// One connection's offer/answer state (see the file comment). Thread rule: a value type.
/// Cost: the descriptions it holds.
package struct PeerConnectionSignalling: Sendable {
    /// Whose turn it is.
    package private(set) var state = PeerConnectionSignalingState.stable
    /// Our last description (offer or answer), and the peer's.
    package private(set) var local: JSEPSessionDescription?
    package private(set) var remote: JSEPSessionDescription?
    /// `requestICERestart` was called and no offer has taken it yet.
    package private(set) var restartRequested = false
    /// The peer's pending offer restarts ICE: our answer must carry new credentials too.
    package private(set) var answerRestartsICE = false

    /// What setting a remote description means for the transport.
    package struct RemoteChange: Equatable, Sendable {
        /// A later exchange on a transport that exists (not the first one).
        package var renegotiation: Bool
        /// The peer's ICE credentials changed (RFC 8445 §9): its candidates are a new generation.
        package var restartsICE: Bool

        package init(renegotiation: Bool, restartsICE: Bool) {
            self.renegotiation = renegotiation
            self.restartsICE = restartsICE
        }
    }

    package init() {}

    /// Throws `.invalidState` unless an offer (`offer`) or an answer may be made now.
    package func check(offer: Bool) throws(PeerConnectionError) {
        if offer {
            guard state == .stable else { throw .invalidState("an offer is already under way") }
        } else {
            guard state == .haveRemoteOffer else { throw .invalidState("an answer needs the remote offer first") }
        }
    }

    /// `restartIce`: the next offer made on an existing transport restarts ICE.
    package mutating func requestICERestart() { restartRequested = true }

    /// For an offer about to be made: whether it restarts ICE (asked for, and there is a transport
    /// to restart). The request is used up either way: before the first exchange there is nothing
    /// to restart.
    package mutating func takeOfferRestart(transportExists: Bool) -> Bool {
        defer { restartRequested = false }
        return restartRequested && transportExists
    }

    /// When the peer's restart offer is applied: whether our side restarts too (used up), before
    /// the peer's new credentials are set so no check of the new generation goes under our old ones.
    package mutating func takeAnswerRestart() -> Bool {
        defer { answerRestartsICE = false }
        return answerRestartsICE
    }

    /// Our offer is made and in force. Throws `.invalidState` when one is already under way.
    package mutating func madeOffer(_ offer: JSEPSessionDescription) throws(PeerConnectionError) {
        try check(offer: true)
        local = offer
        state = .haveLocalOffer
    }

    /// Our answer to the peer's offer is made and in force: the exchange is complete. Throws
    /// `.invalidState` without the peer's offer.
    package mutating func madeAnswer(_ answer: JSEPSessionDescription) throws(PeerConnectionError) {
        try check(offer: false)
        local = answer
        state = .stable
    }

    /// Takes the peer's offer or its answer to ours, whose first usable section has `ice` and
    /// the SHA-256 fingerprint `fingerprint`. `transportExists`: an earlier exchange set up the
    /// transport, so this one keeps it: the certificate must stay (`.invalidDescription`
    /// otherwise, changing nothing), and new ICE credentials are an ICE restart. Throws
    /// `.invalidState` out of turn.
    package mutating func setRemote(
        _ description: JSEPSessionDescription, ice: JSEPICEParameters, fingerprint: [UInt8], transportExists: Bool
    ) throws(PeerConnectionError) -> RemoteChange {
        switch description.type {
        case .offer:
            guard state == .stable else { throw .invalidState("an offer is already under way") }
        case .answer:
            guard state == .haveLocalOffer else { throw .invalidState("an answer needs our offer first") }
        }
        var restartsICE = false
        if transportExists, let old = remote, let oldSection = old.media.first(where: { !$0.isRejected }) {
            restartsICE = old.effectiveICE(of: oldSection) != ice
            if !old.effectiveFingerprints(of: oldSection).contains(where: { $0.bytes == fingerprint }) {
                throw .invalidDescription("the DTLS fingerprint changed within the connection")
            }
        }
        remote = description
        state = description.type == .offer ? .haveRemoteOffer : .stable
        if restartsICE && description.type == .offer { answerRestartsICE = true }
        return RemoteChange(renegotiation: transportExists, restartsICE: restartsICE)
    }
}
