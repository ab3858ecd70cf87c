// What the ICE agent tests share: peers on real loopback sockets, a second path between them
// (a forwarding socket, like a NAT), raw STUN crafting, and polling.
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization

/// One side of a test call: a UDP socket, its agent (reading the socket itself), what arrived
/// outside ICE, and every selected-pair change.
final class ICETestPeer: Sendable {
    let socket: UDPSocket
    let agent: ICEAgent
    let address: SocketAddress
    let received = Mutex<[(bytes: [UInt8], from: SocketAddress)]>([])
    let changes = Mutex<[(local: ICECandidate?, remote: ICECandidate?)]>([])
    let gathered = Atomic<Bool>(false)

    init(bind: SocketAddress, controlling: Bool, configure: (inout ICEAgentConfiguration) -> Void = { _ in }) throws {
        socket = try UDPSocket(bindingTo: bind)
        address = try socket.localAddress()
        var c = ICEAgentConfiguration(controlling: controlling)
        configure(&c)
        agent = ICEAgent(socket: socket, configuration: c)
        agent.onSelectedPairChange = { [weak self] l, r in self?.changes.withLock { $0.append((l, r)) } }
        agent.onGatheringComplete = { [weak self] in self?.gathered.store(true, ordering: .relaxed) }
    }

    /// Starts reading the socket (non-ICE datagrams land in `received`).
    func startReading() {
        agent.startReading { [weak self] bytes, from in self?.received.withLock { $0.append((Array(bytes), from)) } }
    }

    var receivedCount: Int { received.withLock { $0.count } }

    /// Datagrams whose payload starts with `tag`.
    func received(tagged tag: [UInt8]) -> [(bytes: [UInt8], from: SocketAddress)] {
        received.withLock { $0.filter { $0.bytes.starts(with: tag) } }
    }

    /// Sends `count` RTP-looking datagrams (first byte 0x80) tagged `tag` on the agent's path.
    func sendMedia(_ tag: [UInt8], count: Int = 5) {
        for i in 0..<count {
            let bytes = [0x80] + tag.dropFirst() + [UInt8(i)]
            bytes.withUnsafeBytes { _ = agent.path.send($0, on: socket) }
        }
    }

    func close() {
        agent.stopReading()
        agent.close()
        socket.close()
    }
}

/// Wires two peers as signalling would: credentials both ways, candidates trickled through
/// `onCandidate`; both read their sockets and start.
func iceConnect(_ a: ICETestPeer, _ b: ICETestPeer) {
    exchangeICESignalling(a.agent, b.agent)
    a.startReading()
    b.startReading()
    a.agent.start()
    b.agent.start()
}

/// A second path between two sockets: every datagram from `a` is sent on to `b` and the other way,
/// from this socket's own address (what a NAT between them would do).
final class ICEForwarder: Sendable {
    let socket: UDPSocket
    let address: SocketAddress
    let stopped = Atomic<Bool>(false)
    let forwarded = Atomic<Int>(0)
    /// Signalled when the forwarding thread has left its loop.
    let finished = DispatchSemaphore(value: 0)

    init(between a: SocketAddress, and b: SocketAddress) throws {
        socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        address = try socket.localAddress()
        let thread = Thread { [self] in
            defer { finished.signal() }
            var buffer = [UInt8](repeating: 0, count: 2048)
            while !stopped.load(ordering: .relaxed) {
                guard (try? socket.waitUntilReadable(timeoutMilliseconds: 20)) == true,
                    let got = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }), let from = got.source
                else { continue }
                let to = from == a ? b : from == b ? a : nil
                if let to {
                    _ = try? buffer.withUnsafeBytes {
                        try socket.send(UnsafeRawBufferPointer(rebasing: $0[0..<got.count]), to: to)
                    }
                    forwarded.add(1, ordering: .relaxed)
                }
            }
        }
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
        socket.close()
    }
}

/// A Binding request as a peer with `username` would send it, signed with `password`.
func iceBindingRequest(
    username: String?, password: String?, controlling: Bool = true, tieBreaker: UInt64 = 1,
    useCandidate: Bool = false, fingerprint: Bool = true
) -> (bytes: [UInt8], message: STUNMessage) {
    var m = STUNMessage(method: .binding, class: .request)
    if let username { m.appendText(STUNMessage.AttributeType.username, username) }
    m.appendUInt32(STUNMessage.AttributeType.priority, ICECandidate.priority(type: .prflx, localPreference: 65535))
    m.appendUInt64(controlling ? STUNMessage.AttributeType.iceControlling : STUNMessage.AttributeType.iceControlled, tieBreaker)
    if useCandidate { m.attributes.append(.init(type: STUNMessage.AttributeType.useCandidate, value: [])) }
    return (m.encode(integrity: password.map { STUNMessage.shortTermKey(password: $0) }, fingerprint: fingerprint), m)
}

/// Hands `take` each datagram `socket` receives within `seconds`, until `take` returns true.
func iceReceive(_ socket: UDPSocket, seconds: Double, _ take: ([UInt8], SocketAddress) -> Bool) {
    var buffer = [UInt8](repeating: 0, count: 2048)
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        guard (try? socket.waitUntilReadable(timeoutMilliseconds: 10)) == true,
            let got = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }), let from = got.source
        else { continue }
        if take(Array(buffer[0..<got.count]), from) { return }
    }
}

/// Every datagram `socket` receives within `seconds`.
func iceReceiveAll(_ socket: UDPSocket, seconds: Double) -> [(bytes: [UInt8], from: SocketAddress)] {
    var out: [(bytes: [UInt8], from: SocketAddress)] = []
    iceReceive(socket, seconds: seconds) { bytes, from in
        out.append((bytes, from))
        return false
    }
    return out
}

/// The first Binding request `socket` receives within `seconds`.
func iceReceiveRequest(_ socket: UDPSocket, seconds: Double) -> (bytes: [UInt8], message: STUNMessage, from: SocketAddress)? {
    var request: (bytes: [UInt8], message: STUNMessage, from: SocketAddress)?
    iceReceive(socket, seconds: seconds) { bytes, from in
        guard let m = try? STUNMessage(parsing: bytes), m.messageClass == .request else { return false }
        request = (bytes, m, from)
        return true
    }
    return request
}
