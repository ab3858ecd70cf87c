import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Calls across the network lab's NAT kinds and layouts that need coturn, or a direct pair only
/// some NATs allow: the NATs' public addresses routed into the internet namespace or on one flat
/// segment with the services (whose namespace then has no default route, so coturn cannot send
/// to an address outside the lab), TURN over UDP and TCP, over IPv6, port- and
/// address-restricted cones, NATs that hairpin and NATs that do not. Each case carries a few
/// seconds of media both ways, asserts the frames decoded each way from the peers' media-stats,
/// and prints them with both legs' selected pairs. Root only.
@Suite(
    .enabled(
        if: networkLabHasTURN,
        "needs root, ip, nft, coturn's turnserver and a built revue-node: the network lab relay cases are skipped"))
struct NetworkLabRelayTests {
    /// Builds a lab with `options`, runs `prepare` on it, befriends two peers (home 1 and home 2,
    /// given the lab's coturn as STUN and TURN server with its static user unless `staticTURN` is
    /// false, TURN over TCP when `tcp`, plus `arguments`), calls, feeds `seconds` of media both ways, prints the frames and the selected
    /// pairs under `label`, expects media both ways, then runs `check` on the call.
    func relayCall(
        _ label: String, _ options: NetworkLab.Options, tcp: Bool = false, tls: Bool = false, seconds: Double = 3,
        arguments: [String] = [], staticTURN: Bool = true,
        prepare: (NetworkLab) throws -> Void = { _ in }, check: (LabCall) async throws -> Void = { _ in }
    ) async throws {
        let lab = try await NetworkLab(options)
        defer { lab.teardown() }
        try prepare(lab)
        let ice = staticTURN ? LabCall.iceArguments(lab, tcp: tcp, tls: tls) : []
        let call = try LabCall(lab, arguments: arguments + ice)
        defer { call.stop() }
        try await call.befriend()
        try await call.startCall()
        let failures = await call.mediaBothWays(seconds: seconds)
        let pa = await call.mediaPath(call.a, about: call.bId) ?? [:]
        let pb = await call.mediaPath(call.b, about: call.aId) ?? [:]
        let j = call.judged
        print(
            "\(label): a decoded \(j.aFromB) of \(j.fedByB) frames from b, b \(j.bFromA) of \(j.fedByA) from a; "
                + "a's pair \(pa["local"] ?? "none") -> \(pa["remote"] ?? "none"), "
                + "b's pair \(pb["local"] ?? "none") -> \(pb["remote"] ?? "none"); coturn relayed \(lab.relayBytes()) bytes")
        #expect(failures.isEmpty, "\(label): \(failures)\n\(call.diagnosis())")
        try await check(call)
    }

    /// Expects both legs on the relay (`relayed`) or both off it.
    func expectLegs(_ call: LabCall, relayed: Bool) async throws {
        let legs = try #require(await call.legsRelayed(), "no selected pair reported\n\(call.diagnosis())")
        #expect(legs == [relayed, relayed], "legs relayed: \(legs)\n\(call.diagnosis())")
    }

    // MARK: Symmetric NATs: only the relay works

    /// Both homes behind symmetric NATs on one flat segment with coturn: media both ways through
    /// the relay over UDP. Before the relayed candidates stopped pairing with the peer's private
    /// addresses, coturn closed both allocations after its first send to a home's private address
    /// failed, and not one frame arrived.
    @Test func flatSymmetricToSymmetricOverUDP() async throws {
        try await relayCall(
            "flat symmetric/symmetric, TURN over UDP",
            .init(home1: .symmetric, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false),
            check: { try await expectLegs($0, relayed: true) })
    }

    /// The same over TURN over TCP.
    @Test func flatSymmetricToSymmetricOverTCP() async throws {
        try await relayCall(
            "flat symmetric/symmetric, TURN over TCP",
            .init(home1: .symmetric, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false), tcp: true,
            check: { call in
                try await expectLegs(call, relayed: true)
                #expect(call.lab.turnClientTraffic().tcp > 0, "no TCP to coturn\n\(call.diagnosis())")
            })
    }

    /// The same over TURN over TLS (`turns:`): coturn's certificate, made by the lab for its
    /// address, is checked against the lab's CA, and the peers reach coturn only on its TLS port.
    @Test func flatSymmetricToSymmetricOverTLS() async throws {
        var options = NetworkLab.Options(home1: .symmetric, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false)
        options.turnTLS = true
        try await relayCall(
            "flat symmetric/symmetric, TURN over TLS", options, tls: true,
            check: { call in
                try await expectLegs(call, relayed: true)
                let traffic = call.lab.turnClientTraffic()
                #expect(traffic.tls > 0 && traffic.tcp == 0, "\(traffic)\n\(call.diagnosis())")
            })
    }

    /// coturn on an address of its own, apart from the rendezvous node's (the deployments where
    /// they run on separate hosts): symmetric NATs on the flat segment, media both ways through
    /// the relay over UDP, and the same routed with the node handing out the credentials.
    @Test func flatSymmetricToSymmetricWithTURNOnItsOwnAddress() async throws {
        var options = NetworkLab.Options(home1: .symmetric, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false)
        options.turnOwnAddress = true
        try await relayCall(
            "flat symmetric/symmetric, coturn at \(NetworkLab.turnOwnHost), TURN over UDP", options,
            check: { call in
                try await expectLegs(call, relayed: true)
                let pa = await call.mediaPath(call.a, about: call.bId) ?? [:]
                let pb = await call.mediaPath(call.b, about: call.aId) ?? [:]
                let pairs = "\(pa["local"] ?? "") \(pa["remote"] ?? "") \(pb["local"] ?? "") \(pb["remote"] ?? "")"
                #expect(pairs.contains(NetworkLab.turnOwnHost), "no pair through coturn's address: \(pairs)")
            })
    }

    @Test func routedSymmetricToSymmetricWithTURNOnItsOwnAddressAndNodeCredentials() async throws {
        var options = NetworkLab.Options(
            home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false, sharedSecretLifetime: 3600)
        options.turnOwnAddress = true
        try await relayCall(
            "routed symmetric/symmetric, coturn at \(NetworkLab.turnOwnHost), credentials from the node", options,
            staticTURN: false,
            check: { try await expectLegs($0, relayed: true) })
    }

    /// A cone NAT and a symmetric one on the flat segment: media both ways over UDP (the cone's
    /// filter drops the symmetric side's new ports, so through the relay).
    @Test func flatConeToSymmetricOverUDP() async throws {
        try await relayCall(
            "flat port-restricted cone/symmetric, TURN over UDP",
            .init(home1: .cone, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false),
            check: { try await expectLegs($0, relayed: true) })
    }

    /// Symmetric NATs routed into the internet namespace (each on its own link), coturn's
    /// namespace without a default route: through the relay over UDP.
    @Test func routedSymmetricToSymmetricOverUDP() async throws {
        try await relayCall(
            "routed symmetric/symmetric, TURN over UDP",
            .init(home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false),
            check: { try await expectLegs($0, relayed: true) })
    }

    /// The same over TURN over TCP.
    @Test func routedSymmetricToSymmetricOverTCP() async throws {
        try await relayCall(
            "routed symmetric/symmetric, TURN over TCP",
            .init(home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false), tcp: true,
            check: { call in
                try await expectLegs(call, relayed: true)
                #expect(call.lab.turnClientTraffic().tcp > 0, "no TCP to coturn\n\(call.diagnosis())")
            })
    }

    /// IPv6-only homes without NAT whose direct UDP is dropped between them: media both ways
    /// through coturn, reached over IPv6. The relayed addresses are IPv4 (coturn's default: the
    /// client asks for no address family), which the dual-stack sockets pair with each other.
    @Test func ipv6OnlyThroughTheRelayOverUDP() async throws {
        try await relayCall(
            "IPv6-only homes, direct path cut, TURN over UDP over IPv6", .init(home1: .none, home2: .none, ipv6Only: true),
            arguments: ["--host", "::"], prepare: { try $0.killDirectPath() },
            check: { call in
                try await expectLegs(call, relayed: true)
                #expect(call.lab.turnClientTraffic().udp > 0, "no UDP to coturn\n\(call.diagnosis())")
            })
    }

    // MARK: Cone filtering

    /// An address-restricted cone lets in the symmetric side's new port (it sent to that
    /// address): a direct pair, no relay.
    @Test func addressRestrictedConeToSymmetricConnectsDirectly() async throws {
        try await relayCall(
            "flat address-restricted cone/symmetric",
            .init(home1: .addressRestricted, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false),
            check: { try await expectLegs($0, relayed: false) })
    }

    // MARK: Hairpinning

    /// Two homes behind one NAT that cannot reach each other on their LAN: a NAT that hairpins
    /// carries the call between their public (server-reflexive) addresses, no relay.
    @Test func aHairpinningNATConnectsIsolatedHomesDirectly() async throws {
        try await relayCall(
            "one hairpinning cone NAT, isolated homes",
            .init(home1: .cone, sameLAN: true, lanIsolation: true, hairpin: true, servicesDefaultRoute: false),
            check: { call in
                try await expectLegs(call, relayed: false)
                let path = await call.mediaPath(call.a, about: call.bId) ?? [:]
                let remote = path["remote"] as? String ?? ""
                #expect(remote.contains(call.lab.publicAddress(2)), "\(path)")
            })
    }

    /// The same homes behind a NAT that does not hairpin: through the relay.
    @Test func aNATThatDoesNotHairpinLeavesIsolatedHomesTheRelay() async throws {
        try await relayCall(
            "one cone NAT without hairpinning, isolated homes",
            .init(home1: .cone, sameLAN: true, lanIsolation: true, servicesDefaultRoute: false),
            check: { try await expectLegs($0, relayed: true) })
    }
}

/// A call leg that finds no media path says so: `callDidFailWithError(.mediaSetupFailed)` on
/// both sides within a few seconds of the call connecting, naming why. Root only.
@Suite(
    .enabled(
        if: networkLabHasTURN,
        "needs root, ip, nft, coturn's turnserver and a built revue-node: the network lab path failure cases are skipped"))
struct NetworkLabNoPathTests {
    /// Friends, then a call; returns each side's `callDidFailWithError` event (nil when none
    /// came within `timeout` seconds of b accepting) and the seconds it took.
    func failedCall(_ label: String, _ options: NetworkLab.Options, arguments: (NetworkLab) -> [String]) async throws -> [(
        event: [String: Any]?, after: Double
    )] {
        let lab = try await NetworkLab(options)
        defer { lab.teardown() }
        let call = try LabCall(lab, arguments: arguments(lab))
        defer { call.stop() }
        try await call.befriend()
        call.a.send(["cmd": "invite", "friendId": call.bId, "message": "lab call"])
        _ = try #require(await call.b.wait(timeout: 20, event("didReceiveInvitation", ["friendId": call.aId])))
        call.b.send(["cmd": "accept-call", "friendId": call.aId])
        let accepted = MonotonicTime.now
        var out: [(event: [String: Any]?, after: Double)] = []
        for (p, other) in [(call.a, call.bId), (call.b, call.aId)] {
            let e = await p.wait(timeout: 12, event("callDidFailWithError", ["friendId": other]))
            out.append((e, (MonotonicTime.now - accepted).inSeconds))
        }
        for (name, r) in zip(["a", "b"], out) {
            print(
                "\(label): \(name) callDidFailWithError \(String(format: "%.1f", r.after)) s after accepting: "
                    + "\(r.event?["error"] ?? "none") \(r.event?["detail"] ?? "")")
        }
        return out
    }

    /// Symmetric NATs and no TURN server: no pair can work; both sides report it with the checks
    /// that went unanswered, about 5 s after the call starts.
    @Test func symmetricToSymmetricWithoutTURNFailsWithNoPair() async throws {
        let results = try await failedCall(
            "symmetric/symmetric without TURN", .init(home1: .symmetric, home2: .symmetric, flatSegment: true),
            arguments: { ["--stun", $0.stunArgument] })
        for r in results {
            let detail = r.event?["detail"] as? String ?? ""
            #expect(r.event?["error"] as? String == "mediaSetupFailed")
            #expect(detail.contains("no candidate pair succeeded"), "\(r)")
            #expect(r.after < 10, "\(r)")
        }
    }

    /// The same with a TURN server that refuses the password: the refusal is named.
    @Test func symmetricToSymmetricWithRefusedTURNNamesTheRefusal() async throws {
        let results = try await failedCall(
            "symmetric/symmetric, TURN refuses the password", .init(home1: .symmetric, home2: .symmetric, flatSegment: true),
            arguments: {
                ["--stun", $0.stunArgument, "--turn", "\(NetworkLab.turnUser):wrong@\($0.serviceEndpoint(NetworkLab.turnPort))"]
            })
        for r in results {
            let detail = r.event?["detail"] as? String ?? ""
            #expect(r.event?["error"] as? String == "mediaSetupFailed")
            #expect(detail.contains("TURN refused"), "\(r)")
            #expect(r.after < 10, "\(r)")
        }
    }
}
