// The ICE agent through two real NATs: each agent sits in its own namespace behind an nftables
// masquerading router, with coturn (as a STUN server) on the "internet" between them. Their host
// addresses cannot reach each other; they learn their public addresses from coturn, punch holes by
// checking each other's server-reflexive candidates at the same time, and carry media directly
// through both NATs. Each router drops unsolicited packets from outside before conntrack keeps
// them, as home routers do; without that, the first check to arrive would leave an entry that
// makes the other router choose another port for its reply flow, and the holes would never meet.
// Root only.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft"),
        "needs root, ip and nft (not root: skipped)"))
struct ICEAgentNATTests {
    @Test func agentsBehindTwoNATsConnectThroughTheirReflexiveAddresses() throws {
        let p = "rvin\(getpid() % 10_000)"
        // c1 (10.88.1.2) -> r1 (NAT, 198.51.100.11) -+- s (bridge, coturn 198.51.100.2)
        // c2 (10.88.2.2) -> r2 (NAT, 198.51.100.12) -+
        let setup = ICEAgentNamespaceTests.sh(
            """
            set -e
            for n in c1 r1 c2 r2 s; do ip netns add \(p)$n; ip -n \(p)$n link set lo up; done
            ip -n \(p)s link add br0 type bridge; ip -n \(p)s link set br0 up
            ip -n \(p)s addr add 198.51.100.2/24 dev br0
            for i in 1 2; do
              ip link add \(p)c$i type veth peer name \(p)i$i
              ip link set \(p)c$i netns \(p)c$i; ip link set \(p)i$i netns \(p)r$i
              ip link add \(p)o$i type veth peer name \(p)p$i
              ip link set \(p)o$i netns \(p)r$i; ip link set \(p)p$i netns \(p)s
              ip -n \(p)s link set \(p)p$i master br0; ip -n \(p)s link set \(p)p$i up
              ip -n \(p)c$i addr add 10.88.$i.2/24 dev \(p)c$i; ip -n \(p)c$i link set \(p)c$i up
              ip -n \(p)c$i route add default via 10.88.$i.1
              ip -n \(p)r$i addr add 10.88.$i.1/24 dev \(p)i$i; ip -n \(p)r$i link set \(p)i$i up
              ip -n \(p)r$i addr add 198.51.100.1$i/24 dev \(p)o$i; ip -n \(p)r$i link set \(p)o$i up
              ip netns exec \(p)r$i sysctl -qw net.ipv4.ip_forward=1
              ip netns exec \(p)r$i nft add table ip nat
              ip netns exec \(p)r$i nft add chain ip nat post '{ type nat hook postrouting priority 100; }'
              ip netns exec \(p)r$i nft add rule ip nat post oifname \(p)o$i masquerade
              ip netns exec \(p)r$i nft add table ip fw
              ip netns exec \(p)r$i nft add chain ip fw pre '{ type filter hook prerouting priority -150; }'
              ip netns exec \(p)r$i nft add rule ip fw pre iifname \(p)o$i ct state new drop
            done
            """)
        defer { ICEAgentNamespaceTests.sh("for n in c1 r1 c2 r2 s; do ip netns del \(p)$n; done") }
        try #require(setup.status == 0, "namespace setup failed: \(setup.output)")

        let server = try CoturnServer(ip: "198.51.100.2", namespace: "\(p)s")
        defer { _ = server.stop() }
        let probe = try inNetworkNamespace("\(p)s") { try UDPSocket(bindingTo: SocketAddress(ipv4: 198, 51, 100, 2, port: 0)) }
        let binding = STUNMessage(method: .binding, class: .request).encode(fingerprint: true)
        try #require(try stunTransaction(probe, binding, to: server.address, seconds: 8) != nil, "coturn did not come up")

        final class Side: Sendable {
            let socket: UDPSocket
            let agent: ICEAgent
            let media = Mutex<[[UInt8]]>([])
            init(namespace: String, address: SocketAddress, stun: SocketAddress, controlling: Bool) throws {
                socket = try inNetworkNamespace(namespace) { try UDPSocket(bindingTo: address) }
                var c = ICEAgentConfiguration(controlling: controlling)
                c.servers = [ICEServer(kind: .stun, address: stun)]
                agent = ICEAgent(socket: socket, configuration: c)
                agent.startReading { [weak self] bytes, _ in self?.media.withLock { $0.append(Array(bytes)) } }
            }
            func arrived(_ tag: UInt8) -> Int { media.withLock { $0.filter { $0.count > 1 && $0[1] == tag }.count } }
            func send(_ tag: UInt8) {
                let bytes: [UInt8] = [0x80, tag] + [UInt8](repeating: 7, count: 80)
                bytes.withUnsafeBytes { _ = agent.path.send($0, on: socket) }
            }
        }
        let a = try Side(
            namespace: "\(p)c1", address: SocketAddress(ipv4: 10, 88, 1, 2, port: 0), stun: server.address, controlling: true)
        let b = try Side(
            namespace: "\(p)c2", address: SocketAddress(ipv4: 10, 88, 2, 2, port: 0), stun: server.address, controlling: false)
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
        #expect(
            wait(8) { a.agent.selectedPair != nil && b.agent.selectedPair != nil },
            "A: \(a.agent.localCandidates) \(a.agent.pairSnapshots) B: \(b.agent.localCandidates) \(b.agent.pairSnapshots)")
        // Each learned its public address from coturn, and talks to the other's public address.
        let aPublic = a.agent.localCandidates.first { $0.type == .srflx }?.address
        let bPublic = b.agent.localCandidates.first { $0.type == .srflx }?.address
        #expect(aPublic?.addressBytes == [198, 51, 100, 11] && bPublic?.addressBytes == [198, 51, 100, 12])
        #expect(a.agent.path.route?.peer == bPublic && b.agent.path.route?.peer == aPublic)
        #expect(a.agent.path.route?.isRelayed == false)
        #expect(
            wait(2) {
                a.send(0xA4)
                b.send(0xB4)
                return b.arrived(0xA4) >= 3 && a.arrived(0xB4) >= 3
            })
    }
}
