// The ICE agent on a real two-link network: namespaces a and b joined by two veth links (10.91.1.0/24
// and 10.91.2.0/24), each agent on one wildcard socket offering both of its addresses. nftables
// then drops everything on the first link, as a dead Wi-Fi would: the agents move to the second
// link within 2 s and media flows again; when the rule goes, they return to the first. Root only.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft"),
        "needs root, ip and nft (not root: skipped)"))
struct ICEAgentNamespaceTests {
    @discardableResult
    static func sh(_ script: String) -> (status: Int32, output: String) { runShell(script) }

    /// One side: a wildcard socket inside a namespace, an agent offering `hosts`, the media it got.
    final class Side: Sendable {
        let socket: UDPSocket
        let agent: ICEAgent
        let media = Mutex<[(bytes: [UInt8], from: SocketAddress)]>([])

        init(namespace: String, hosts: [SocketAddress], controlling: Bool) throws {
            socket = try inNetworkNamespace(namespace) { try UDPSocket(bindingTo: .anyIPv4(port: 0)) }
            var c = ICEAgentConfiguration(controlling: controlling)
            c.hostAddresses = hosts
            agent = ICEAgent(socket: socket, configuration: c)
            agent.startReading { [weak self] bytes, from in self?.media.withLock { $0.append((Array(bytes), from)) } }
        }

        func arrived(tagged tag: UInt8) -> [(bytes: [UInt8], from: SocketAddress)] {
            media.withLock { $0.filter { $0.bytes.count > 1 && $0.bytes[1] == tag } }
        }

        func send(tag: UInt8) {
            let bytes: [UInt8] = [0x80, tag] + [UInt8](repeating: 0x33, count: 60)
            bytes.withUnsafeBytes { _ = agent.path.send($0, on: socket) }
        }
    }

    @Test func firstLinkDiesAndTheSecondCarriesTheCall() throws {
        let p = "rvic\(getpid() % 10_000)"
        let setup = Self.sh(
            """
            set -e
            ip netns add \(p)a; ip netns add \(p)b
            ip link add \(p)a1 type veth peer name \(p)b1
            ip link add \(p)a2 type veth peer name \(p)b2
            ip link set \(p)a1 netns \(p)a; ip link set \(p)a2 netns \(p)a
            ip link set \(p)b1 netns \(p)b; ip link set \(p)b2 netns \(p)b
            ip -n \(p)a addr add 10.91.1.1/24 dev \(p)a1; ip -n \(p)a addr add 10.91.2.1/24 dev \(p)a2
            ip -n \(p)b addr add 10.91.1.2/24 dev \(p)b1; ip -n \(p)b addr add 10.91.2.2/24 dev \(p)b2
            for n in a b; do for l in 1 2; do ip -n \(p)$n link set \(p)$n$l up; done; ip -n \(p)$n link set lo up; done
            """)
        defer { Self.sh("ip netns del \(p)a; ip netns del \(p)b") }
        try #require(setup.status == 0, "namespace setup failed: \(setup.output)")

        let a = try Side(
            namespace: "\(p)a", hosts: [SocketAddress(ipv4: 10, 91, 1, 1, port: 0), SocketAddress(ipv4: 10, 91, 2, 1, port: 0)],
            controlling: true)
        let b = try Side(
            namespace: "\(p)b", hosts: [SocketAddress(ipv4: 10, 91, 1, 2, port: 0), SocketAddress(ipv4: 10, 91, 2, 2, port: 0)],
            controlling: false)
        defer {
            for s in [a, b] {
                s.agent.stopReading()
                s.agent.close()
            }
        }
        exchangeICESignalling(a.agent, b.agent)
        a.agent.start()
        b.agent.start()

        func wait(_ seconds: Double, _ condition: () -> Bool) -> Bool { pollUntil(seconds, condition) }
        func on(_ s: Side, link: UInt8) -> Bool { s.agent.path.route.map { $0.peer.addressBytes[2] == link } ?? false }

        // The first link's addresses have the higher local preference: its pair is selected.
        #expect(
            wait(3) {
                on(a, link: 1) && on(b, link: 1)
                    && a.agent.pairSnapshots.contains { $0.valid && $0.remote.address.addressBytes[2] == 2 }
            }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")

        // The first link goes dark in namespace a, both ways.
        let drop = Self.sh(
            """
            set -e
            ip netns exec \(p)a nft add table inet ice
            ip netns exec \(p)a nft add chain inet ice in '{ type filter hook input priority 0; }'
            ip netns exec \(p)a nft add chain inet ice out '{ type filter hook output priority 0; }'
            ip netns exec \(p)a nft add rule inet ice in iifname \(p)a1 drop
            ip netns exec \(p)a nft add rule inet ice out oifname \(p)a1 drop
            """)
        try #require(drop.status == 0, "nft failed: \(drop.output)")
        #expect(wait(2) { on(a, link: 2) && on(b, link: 2) }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        #expect(
            wait(1) {
                a.send(tag: 0xA2)
                b.send(tag: 0xB2)
                return b.arrived(tagged: 0xA2).count >= 3 && a.arrived(tagged: 0xB2).count >= 3
            })
        #expect(b.arrived(tagged: 0xA2).allSatisfy { $0.from.addressBytes == [10, 91, 2, 1] })

        // The link comes back: the controlling agent renominates the first link's pair.
        Self.sh("ip netns exec \(p)a nft delete table inet ice")
        #expect(wait(4) { on(a, link: 1) && on(b, link: 1) }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        #expect(
            wait(1) {
                a.send(tag: 0xA3)
                return b.arrived(tagged: 0xA3).count >= 3
            })
        #expect(b.arrived(tagged: 0xA3).allSatisfy { $0.from.addressBytes == [10, 91, 1, 1] })
    }
}
