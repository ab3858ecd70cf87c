import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Calls that must go through coturn (or find a direct pair) across the network lab's NAT kinds
/// and layouts: the NATs' public addresses routed into the internet namespace, or on one flat
/// segment with the services. Each case carries a few seconds of media both ways, asserts it from
/// the peers' media-stats (frames decoded each way) and prints the selected pair of both legs.
/// Root only.
@Suite(
    .enabled(
        if: networkLabHasTURN,
        "needs root, ip, nft, coturn's turnserver and a built revue-node: the network lab relay cases are skipped"))
struct NetworkLabRelayTests {
    /// Builds a lab with `options`, befriends two peers (home 1 and home 2, given the lab's coturn
    /// as STUN and TURN server, TURN over TCP when `tcp`), calls, feeds `seconds` of media both
    /// ways, prints the frames and the selected pairs under `label`, and returns them.
    @discardableResult
    func relayCall(
        _ label: String, _ options: NetworkLab.Options, tcp: Bool = false, seconds: Double = 3,
        arguments: [String] = []
    ) async throws -> (aPath: [String: Any], bPath: [String: Any]) {
        let lab = try await NetworkLab(options)
        defer { lab.teardown() }
        let call = try LabCall(lab, arguments: arguments + LabCall.iceArguments(lab, tcp: tcp))
        defer { call.stop() }
        try await call.befriend()
        try await call.startCall()
        let failures = await call.mediaBothWays(seconds: seconds)
        let pa = await call.mediaPath(call.a, about: call.bId) ?? [:]
        let pb = await call.mediaPath(call.b, about: call.aId) ?? [:]
        print(
            "\(label): a decoded \(call.judged.aFromB) of \(call.judged.fedByB) frames from b, b \(call.judged.bFromA) of \(call.judged.fedByA) from a; "
                + "a's pair \(pa["local"] ?? "none") -> \(pa["remote"] ?? "none"), "
                + "b's pair \(pb["local"] ?? "none") -> \(pb["remote"] ?? "none")")
        #expect(failures.isEmpty, "\(label): \(failures)\n\(call.diagnosis())")
        return (pa, pb)
    }

    /// Both homes behind symmetric NATs on one flat segment with coturn: media both ways through
    /// the relay over UDP.
    @Test func flatSymmetricToSymmetricOverUDP() async throws {
        try await relayCall(
            "flat symmetric/symmetric TURN UDP",
            .init(home1: .symmetric, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false))
    }

    /// A cone NAT and a symmetric one on one flat segment with coturn: media both ways.
    @Test func flatConeToSymmetricOverUDP() async throws {
        try await relayCall(
            "flat cone/symmetric TURN UDP", .init(home1: .cone, home2: .symmetric, flatSegment: true, servicesDefaultRoute: false)
        )
    }
}
