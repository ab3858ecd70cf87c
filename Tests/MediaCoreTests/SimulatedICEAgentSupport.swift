import MediaCore
// What the simulated ICE agent suites share: agents on endpoints of a `VirtualNetwork`, driven by
// a `SimulatedTime` (the agents' scheduler), with every selected-pair change stamped with the
// simulated time it happened at.
import MediaTestSupport
import Synchronization

/// One side of a simulated call: an endpoint of the network, its agent (reading the endpoint),
/// what arrived outside ICE, and every selected-pair change with its simulated time.
final class SimulatedICEPeer: Sendable {
    let port: VirtualDatagramPort
    let agent: ICEAgent
    let time: SimulatedTime
    let received = Mutex<[(bytes: [UInt8], from: SocketAddress)]>([])
    let changes = Mutex<[(at: MonotonicTime, local: ICECandidate?, remote: ICECandidate?)]>([])
    let gatheredAt = Mutex<MonotonicTime?>(nil)

    var address: SocketAddress { port.address }

    init(
        _ network: VirtualNetwork, _ address: SocketAddress, controlling: Bool, seed: UInt64,
        servers: [ICEServer] = [], configure: (inout ICEAgentConfiguration) -> Void = { _ in }
    ) {
        port = network.bind(address)
        time = network.time
        var c = ICEAgentConfiguration(controlling: controlling)
        c.servers = servers
        configure(&c)
        agent = ICEAgent(transport: port, configuration: c, scheduler: network.time, seed: seed)
        let time = network.time
        agent.onSelectedPairChange = { [weak self] l, r in self?.changes.withLock { $0.append((time.now, l, r)) } }
        agent.onGatheringComplete = { [weak self] in self?.gatheredAt.withLock { $0 = time.now } }
        agent.startReading { [weak self] bytes, from in self?.received.withLock { $0.append((Array(bytes), from)) } }
        // Media that came through a TURN relay, unwrapped by the agent (the sender is not known here).
        agent.onRelayedMedia = { [weak self] bytes in self?.received.withLock { $0.append((Array(bytes), .anyIPv4(port: 0))) } }
    }

    /// Datagrams whose payload starts with `tag`.
    func received(tagged tag: [UInt8]) -> [(bytes: [UInt8], from: SocketAddress)] {
        received.withLock { $0.filter { $0.bytes.starts(with: tag) } }
    }

    /// Sends `count` RTP-looking datagrams tagged `tag` on the agent's route (direct from the
    /// endpoint, or as ChannelData through the TURN allocation); how many had a route.
    @discardableResult
    func sendMedia(_ tag: [UInt8], count: Int = 5) -> Int {
        var sent = 0
        for i in 0..<count {
            let bytes = [0x80] + tag.dropFirst() + [UInt8(i)]
            switch agent.path.route {
            case .direct(let to, _)?:
                port.send(bytes, to: to)
                sent += 1
            case .relay(let sender, let channel, _)?:
                if bytes.withUnsafeBytes({ sender.sendChannelData($0, channel: channel) }) { sent += 1 }
            case nil:
                break
            }
        }
        return sent
    }

    /// The remote address of the selected pair now.
    var selectedRemote: SocketAddress? { agent.selectedPair?.remote.address }

    /// When the route last changed to one toward `remote` (nil: to no route), after `since`.
    func changedAt(to remote: SocketAddress?, after since: MonotonicTime) -> MonotonicTime? {
        changes.withLock { $0.first { $0.at >= since && $0.remote?.address == remote }?.at }
    }

    func close() {
        agent.stopReading()
        agent.close()
        port.close()
    }
}

/// Simulated milliseconds from `start` to `t`.
func simulatedMilliseconds(_ t: MonotonicTime?, since start: MonotonicTime) -> Double? {
    t.map { Double(($0 - start).inNanoseconds) / 1e6 }
}

/// Wires two peers as signalling would and starts both agents.
func simulatedICEConnect(_ a: SimulatedICEPeer, _ b: SimulatedICEPeer) {
    exchangeICESignalling(a.agent, b.agent)
    a.agent.start()
    b.agent.start()
}

/// A Binding request as a peer with `username` would send it, signed with `password`.
func simulatedBindingRequest(username: String, password: String, controlling: Bool = true, tieBreaker: UInt64 = 1) -> [UInt8] {
    var m = STUNMessage(method: .binding, class: .request)
    m.appendText(STUNMessage.AttributeType.username, username)
    m.appendUInt32(STUNMessage.AttributeType.priority, ICECandidate.priority(type: .prflx, localPreference: 65535))
    m.appendUInt64(controlling ? STUNMessage.AttributeType.iceControlling : STUNMessage.AttributeType.iceControlled, tieBreaker)
    return m.encode(integrity: STUNMessage.shortTermKey(password: password), fingerprint: true)
}

/// An endpoint that never answers and records the simulated time of each datagram it receives,
/// and whether it was a STUN request (a check, not an answer to one).
final class SimulatedVictim: Sendable {
    let port: VirtualDatagramPort
    let arrivals = Mutex<[(at: MonotonicTime, size: Int, request: Bool)]>([])

    init(_ network: VirtualNetwork, _ address: SocketAddress) {
        port = network.bind(address)
        let time = network.time
        port.start(screen: nil) { [weak self] bytes, _ in
            let request = (try? STUNMessage(parsing: bytes))?.messageClass == .request
            self?.arrivals.withLock { $0.append((time.now, bytes.count, request)) }
        }
    }

    var count: Int { arrivals.withLock { $0.count } }
    var bytes: Int { arrivals.withLock { $0.map(\.size).reduce(0, +) } }
}
