import MediaCore
import MediaTestSupport
import Synchronization
import Testing

// TURNClient's timers on simulated time: the allocation, permission and channel refreshes fall at
// the exact seconds its timing says, and the silence check sends a Refresh at once, backs off while
// the server confirms, and makes the relay again after a 437. coturn cannot run on a simulated
// clock, so the server here is a script that answers each request as RFC 8656 says (signed with
// the long-term key); the same behaviour against a real coturn is in TURNClientTests.

/// A TURN server script for one socketless client: answers the unsigned first request with a 401
/// challenge, Allocate with a relayed address, Refresh, CreatePermission and ChannelBind with
/// success (or Refresh with 437 once `allocationGone` is set), each signed; records every request
/// with the simulated time it was sent at.
final class ScriptedTURNServer: Sendable {
    static let realm = "simulated.test", nonce = "0123456789abcdef", user = "u", password = "p"
    static let address = SocketAddress(ipv4: 192, 0, 2, 1, port: 3478)
    let time: SimulatedTime
    private let outbox = Mutex<[[UInt8]]>([])
    /// Requests seen: method and the simulated seconds since `start` they were sent at.
    let requests = Mutex<[(method: STUNMessage.Method, at: Double)]>([])
    let allocationGone = Atomic<Bool>(false)
    let allocations = Atomic<Int>(0)
    let start: MonotonicTime

    init(time: SimulatedTime) {
        self.time = time
        start = time.now
    }

    var server: ICEServer { ICEServer(kind: .turn, address: Self.address, username: Self.user, password: Self.password) }

    /// The client's send tap: keeps the bytes for `answer`.
    func tap(_ bytes: [UInt8]) { outbox.withLock { $0.append(bytes) } }

    /// Answers everything the client sent since the last call (in order), at the current time.
    func answer(_ client: TURNClient) {
        let key = STUNMessage.longTermKey(username: Self.user, realm: Self.realm, password: Self.password)
        while let bytes = outbox.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            guard let m = try? STUNMessage(parsing: bytes), m.messageClass == .request else { continue }
            let seconds = Double((time.now - start).inNanoseconds) / 1e9
            requests.withLock { $0.append((m.method, seconds)) }
            var r: STUNMessage
            var signed = true
            if m.value(STUNMessage.AttributeType.messageIntegrity) == nil {
                r = STUNMessage(method: m.method, class: .errorResponse, transactionID: m.transactionID)
                r.appendErrorCode(401, reason: "Unauthorized")
                r.appendText(STUNMessage.AttributeType.realm, Self.realm)
                r.appendText(STUNMessage.AttributeType.nonce, Self.nonce)
                signed = false
            } else if m.method == .refresh && allocationGone.load(ordering: .relaxed) {
                r = STUNMessage(method: m.method, class: .errorResponse, transactionID: m.transactionID)
                r.appendErrorCode(437, reason: "Allocation Mismatch")
            } else {
                r = STUNMessage(method: m.method, class: .successResponse, transactionID: m.transactionID)
                if m.method == .allocate {
                    let n = allocations.add(1, ordering: .relaxed).newValue
                    allocationGone.store(false, ordering: .relaxed)
                    r.appendXORAddress(
                        STUNMessage.AttributeType.xorRelayedAddress,
                        SocketAddress(ipv4: 198, 51, 100, 1, port: UInt16(50_000 + n)))
                    r.appendXORAddress(
                        STUNMessage.AttributeType.xorMappedAddress, SocketAddress(ipv4: 203, 0, 113, 5, port: 40_000))
                }
                if m.method == .allocate || m.method == .refresh { r.appendUInt32(STUNMessage.AttributeType.lifetime, 600) }
            }
            let out = r.encode(integrity: signed ? key : nil, fingerprint: true)
            _ = out.withUnsafeBytes { client.handleDatagram($0, from: Self.address) }
        }
    }

    /// The simulated seconds at which requests of `method` were sent.
    func times(_ method: STUNMessage.Method) -> [Double] { requests.withLock { $0.filter { $0.method == method }.map(\.at) } }
}

@Suite struct SimulatedTURNClientTests {
    /// Moves simulated time forward `seconds` in `step`s, the server answering after each, and
    /// `each` (if given) running before each step.
    static func run(
        _ time: SimulatedTime, _ server: ScriptedTURNServer, _ client: TURNClient, seconds: Double, step: Double = 0.1,
        each: () -> Void = {}
    ) {
        let end = time.now + .nanoseconds(Int64(seconds * 1e9))
        server.answer(client)
        while time.now < end {
            each()
            time.advance(by: .nanoseconds(Int64(step * 1e9)))
            server.answer(client)
        }
    }

    /// Lifetime 600 s: the allocation is refreshed at 540 s and 1080 s (60 s before it ends); the
    /// channel every 540 s; the permission every 240 s, counted from the last ChannelBind, which
    /// refreshes it too (RFC 8656 §12.2): 0, 240, 480, then 780 and 1020. Nothing else is sent in
    /// 20 minutes.
    @Test func refreshesFallWhenTheirTimersSay() throws {
        let time = SimulatedTime()
        let server = ScriptedTURNServer(time: time)
        let client = TURNClient(socketlessServer: server.server, scheduler: time) { server.tap($0) }
        let peer = SocketAddress(ipv4: 198, 51, 100, 7, port: 9000)
        _ = client.bindChannel(peer)
        client.allocate()
        Self.run(time, server, client, seconds: 1200, step: 1)
        print(
            "simulated 1200 s: Refresh at \(server.times(.refresh)) s, CreatePermission at \(server.times(.createPermission)) s, "
                + "ChannelBind at \(server.times(.channelBind)) s")
        #expect(server.times(.allocate) == [0, 0], "the unsigned Allocate and the signed one")
        #expect(server.times(.refresh) == [540, 1080])
        #expect(server.times(.createPermission) == [0, 240, 480, 780, 1020])
        #expect(server.times(.channelBind) == [0, 540, 1080])
        let stats = client.statistics
        #expect(stats.allocationRefreshes == 2 && stats.livenessProbes == 0 && stats.timeouts == 0 && stats.retransmissions == 0)
        #expect(client.channel(for: peer)?.confirmed == true)
        client.close()
    }

    /// Sending ChannelData every 100 ms into silence: the first check Refresh goes 4 to 5 s after
    /// the allocation, the server confirms it, the next waits twice as long (8 to 9 s later); then
    /// the server has lost the allocation: the next check gets a 437, a new Allocate goes at the
    /// same instant, and the permission and channel are installed again on the new relay. The
    /// silence is measured afresh there: with the peer still silent, the next check comes 4 s
    /// after the new relay was made.
    @Test func silenceBringsARefreshAtOnceAndALostRelayIsMadeAgain() throws {
        let time = SimulatedTime()
        let server = ScriptedTURNServer(time: time)
        let client = TURNClient(socketlessServer: server.server, scheduler: time) { server.tap($0) }
        let peer = SocketAddress(ipv4: 198, 51, 100, 7, port: 9000)
        let channel = try #require(client.bindChannel(peer))
        client.allocate()
        Self.run(time, server, client, seconds: 0.1)
        let first = try #require(simulatedRelayed(client))
        let media = [UInt8](repeating: 1, count: 100)
        let send = { _ = media.withUnsafeBytes { client.sendChannelData($0, channel: channel) } }
        Self.run(time, server, client, seconds: 13, each: send)
        #expect(client.statistics.livenessProbes == 2 && client.statistics.livenessProbesConfirmed == 2)
        #expect(client.statistics.allocationsLost == 0)
        server.allocationGone.store(true, ordering: .relaxed)
        Self.run(time, server, client, seconds: 20, each: send)
        let refreshes = server.times(.refresh), allocates = server.times(.allocate)
        let second = try #require(simulatedRelayed(client))
        let stats = client.statistics
        print(
            "simulated silence: check Refreshes at \(refreshes) s, Allocates at \(allocates) s; relayed \(first) then \(second); "
                + "probes \(stats.livenessProbes) (\(stats.livenessProbesConfirmed) confirmed), lost \(stats.allocationsLost): "
                + (stats.lastAllocationLoss ?? ""))
        try #require(refreshes.count == 4, "\(refreshes)")
        #expect(refreshes[0] >= 4 && refreshes[0] <= 5.1)
        #expect(refreshes[1] - refreshes[0] >= 8 && refreshes[1] - refreshes[0] <= 9.1)
        #expect(refreshes[2] - refreshes[1] >= 16 && refreshes[2] - refreshes[1] <= 17.1)
        #expect(allocates.count == 3 && allocates[2] == refreshes[2], "a new Allocate at once after the 437")
        #expect(refreshes[3] - allocates[2] >= 4 && refreshes[3] - allocates[2] <= 5.1)
        #expect(second != first)
        #expect(stats.allocationsLost == 1 && (stats.lastAllocationLoss ?? "").contains("437"))
        #expect(server.times(.channelBind).last == refreshes[2] && client.channel(for: peer)?.confirmed == true)
        client.close()
    }
}

/// The relayed address of an allocated client.
func simulatedRelayed(_ client: TURNClient) -> SocketAddress? {
    if case .allocated(let r, _) = client.state { return r }
    return nil
}
