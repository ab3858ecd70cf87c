// The offer/answer state machine of a connection, without a transport: whose turn it is, what a
// remote description means (first exchange, renegotiation, ICE restart) and which refusals
// change nothing. No clock, no socket: runs in the unit phase.
import MediaCore
import Testing

@Suite struct PeerConnectionSignallingTests {
    static func ice(_ ufrag: String) -> JSEPICEParameters {
        JSEPICEParameters(usernameFragment: ufrag, password: "password-of-\(ufrag)-0123456789")
    }
    static let ours = JSEPFingerprint(bytes: (0..<32).map { UInt8($0) })
    static let theirs = JSEPFingerprint(bytes: (0..<32).map { UInt8(255 - $0) })

    /// A description of one audio section with `ufrag`'s credentials and `fingerprint`.
    static func description(_ type: JSEPType, ufrag: String, fingerprint: JSEPFingerprint) -> JSEPSessionDescription {
        let transport = JSEPTransportParameters(ice: ice(ufrag), fingerprints: [fingerprint], cname: "c")
        let track = JSEPTrack(kind: .audio, id: "mic", streamID: "s", ssrc: 1)
        let offer = JSEPNegotiator.createOffer(tracks: [track], transport: transport, sessionID: 1)
        guard type == .answer else { return offer }
        return JSEPNegotiator.createAnswer(to: offer, tracks: [track], transport: transport, sessionID: 2)
    }

    @Test func turnsAreKeptAndAnOutOfTurnStepChangesNothing() throws {
        var s = PeerConnectionSignalling()
        #expect(throws: PeerConnectionError.invalidState("an answer needs the remote offer first")) {
            try s.madeAnswer(Self.description(.answer, ufrag: "aaaa", fingerprint: Self.ours))
        }
        let answer = Self.description(.answer, ufrag: "bbbb", fingerprint: Self.theirs)
        #expect(throws: PeerConnectionError.invalidState("an answer needs our offer first")) {
            _ = try s.setRemote(answer, ice: Self.ice("bbbb"), fingerprint: Self.theirs.bytes, transportExists: false)
        }
        #expect(s.state == .stable && s.local == nil && s.remote == nil)

        let offer = Self.description(.offer, ufrag: "aaaa", fingerprint: Self.ours)
        try s.madeOffer(offer)
        #expect(s.state == .haveLocalOffer && s.local == offer)
        #expect(throws: PeerConnectionError.invalidState("an offer is already under way")) { try s.madeOffer(offer) }
        let peerOffer = Self.description(.offer, ufrag: "bbbb", fingerprint: Self.theirs)
        #expect(throws: PeerConnectionError.invalidState("an offer is already under way")) {
            _ = try s.setRemote(peerOffer, ice: Self.ice("bbbb"), fingerprint: Self.theirs.bytes, transportExists: false)
        }
        let change = try s.setRemote(answer, ice: Self.ice("bbbb"), fingerprint: Self.theirs.bytes, transportExists: false)
        #expect(change == .init(renegotiation: false, restartsICE: false))
        #expect(s.state == .stable && s.remote == answer)
    }

    @Test func newCredentialsInALaterOfferAreAnICERestartTheAnswerFollows() throws {
        var s = PeerConnectionSignalling()
        _ = try s.setRemote(
            Self.description(.offer, ufrag: "bbbb", fingerprint: Self.theirs), ice: Self.ice("bbbb"),
            fingerprint: Self.theirs.bytes, transportExists: false)
        try s.madeAnswer(Self.description(.answer, ufrag: "aaaa", fingerprint: Self.ours))
        // The same credentials again: a renegotiation, no restart.
        let same = try s.setRemote(
            Self.description(.offer, ufrag: "bbbb", fingerprint: Self.theirs), ice: Self.ice("bbbb"),
            fingerprint: Self.theirs.bytes, transportExists: true)
        let answerRestartsAfterSame = s.takeAnswerRestart()
        #expect(same == .init(renegotiation: true, restartsICE: false) && !answerRestartsAfterSame)
        try s.madeAnswer(Self.description(.answer, ufrag: "aaaa", fingerprint: Self.ours))
        // New ones: a restart, and our answer must restart too (once).
        let restart = try s.setRemote(
            Self.description(.offer, ufrag: "cccc", fingerprint: Self.theirs), ice: Self.ice("cccc"),
            fingerprint: Self.theirs.bytes, transportExists: true)
        #expect(restart == .init(renegotiation: true, restartsICE: true))
        let first = s.takeAnswerRestart(), second = s.takeAnswerRestart()
        #expect(first && !second)
    }

    @Test func aChangedCertificateIsRefusedAndChangesNothing() throws {
        var s = PeerConnectionSignalling()
        try s.madeOffer(Self.description(.offer, ufrag: "aaaa", fingerprint: Self.ours))
        let answer = Self.description(.answer, ufrag: "bbbb", fingerprint: Self.theirs)
        _ = try s.setRemote(answer, ice: Self.ice("bbbb"), fingerprint: Self.theirs.bytes, transportExists: false)
        try s.madeOffer(Self.description(.offer, ufrag: "aaaa", fingerprint: Self.ours))
        let forged = Self.description(.answer, ufrag: "bbbb", fingerprint: Self.ours)
        #expect(throws: PeerConnectionError.invalidDescription("the DTLS fingerprint changed within the connection")) {
            _ = try s.setRemote(forged, ice: Self.ice("bbbb"), fingerprint: Self.ours.bytes, transportExists: true)
        }
        #expect(s.state == .haveLocalOffer && s.remote == answer)
    }

    @Test func aRestartAskedForIsTakenByTheNextOfferOnATransportOnly() {
        var s = PeerConnectionSignalling()
        s.requestICERestart()
        let beforeAnyExchange = s.takeOfferRestart(transportExists: false)
        let afterUse = s.takeOfferRestart(transportExists: true)
        #expect(!beforeAnyExchange, "before the first exchange there is nothing to restart")
        #expect(!afterUse, "the request was used up")
        s.requestICERestart()
        let taken = s.takeOfferRestart(transportExists: true), again = s.takeOfferRestart(transportExists: true)
        #expect(taken && !again)
    }
}
