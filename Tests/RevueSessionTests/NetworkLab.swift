// A network lab on one machine, built from Linux network namespaces, veth links and nftables:
// an "internet" namespace holding a rendezvous node and a coturn TURN server, and two homes, each
// behind its own NAT namespace (or both on one LAN). Root only (ip netns, nft, turnserver).
//
// Topology (IPv4; every name below is a namespace, `<p>` the lab's prefix):
//
//   <p>h1 10.0.1.2 ── eth0|lan 10.0.1.1 <p>n1 192.0.2.2 wan ── w1 192.0.2.1 ┐
//                                                                          <p>i  lo 203.0.113.1
//   <p>h2 10.0.2.2 ── eth0|lan 10.0.2.1 <p>n2 198.51.100.2 wan ── w2 198.51.100.1 ┘  (rendezvous :33400,
//                                                                              coturn :3478, relays 49160-49200)
//
// - `flatSegment`: no routed links; the NATs' wan addresses (203.0.113.2 and .3) and the
//   services (203.0.113.1) share one Ethernet segment (macvlans in bridge mode on a veth in <p>i),
//   so the NATs reach each other and coturn's relay ports without a router between them. The
//   direct-path counters and `killDirectPath()` then sit in each NAT's postrouting hook.
// - `servicesDefaultRoute: false`: the internet namespace has no default route, as on a flat
//   segment with nothing beyond it. A datagram coturn relays to an address outside the lab's
//   links (a home's private address) then fails with "network unreachable", and coturn closes the
//   allocation that sent it (its log: "udp send: Network is unreachable", then the allocation's
//   "closed ... reason: general"); the client is not told and keeps sending into the void.
// - NAT `.cone`: `masquerade` on the NAT's wan. Linux keeps the source port when it can and
//   reuses the mapping for every destination (endpoint-independent mapping); an inbound packet
//   is only let in when it answers a conntrack entry, i.e. comes from an address and port the
//   home sent to (endpoint-dependent filtering): a port-restricted cone in effect. Like a home
//   router, the NAT's firewall drops unsolicited inbound packets (`ct state new` on wan): without
//   it, a peer's early hole-punching packet would leave a conntrack entry in the NAT for the
//   NAT itself, and the home's own packet to that peer, a moment later, would then be mapped to
//   another port.
// - NAT `.addressRestricted`: `.cone`'s masquerade, and a set of the addresses the home sent to
//   (2 minutes each): a new inbound flow from one of them, whatever its source port, is DNATed to
//   the home at the port it came to (the masquerade kept the home's port), ahead of the drop of
//   new flows. An address-restricted cone, which a symmetric NAT's new port per destination can
//   reach directly.
// - NAT `.symmetric`: `masquerade random`: each new destination gets its own randomly chosen
//   source port (a conntrack entry per flow), which is what makes it symmetric. `probeMapping`
//   checks it on the running lab (`NetworkLabSelfTests`): one socket sending to three ports was
//   seen from three different public ports drawn from the whole range (9255, 21871, 54968 in
//   one run), while behind `.cone` all three saw the socket's own port.
// - NAT `.none`: the NAT namespace only routes; the home's LAN is then 198.18.<n>.0/24 (routed,
//   not private space), so the home's addresses are seen as they are.
// - `sameLAN`: home 2 sits on home 1's LAN (10.0.1.3), behind home 1's NAT. The LAN is a set of
//   macvlans in bridge mode on one veth in <p>n1 (this kernel lets no bridge or dummy device be
//   made in a namespace; macvlan works).
// - `lanIsolation` (with `sameLAN`): each home drops the other's LAN address, as an access
//   point's client isolation does, and takes its ephemeral ports from its own range (home 1
//   20000-29999, home 2 30000-39999). `hairpin` then makes the NAT loop a home's datagram to the
//   NAT's public address back to the home whose range the port is in (DNAT by port range, SNAT
//   to the public address), so the homes reach each other at their server-reflexive addresses;
//   without it such a datagram ends at the NAT.
// - `ipv6Only`: homes and their links get only IPv6, routed without NAT: home n has
//   2001:db8:<n>::2/64, NAT n's wan 2001:db8:a<n>::2/64, the services 2001:db8:ff::1.
// - `dualStackHomes`: those homes get IPv6 beside their NATed IPv4: 2001:db8:<n>::2/64, routed
//   without translation, behind the same stateful filter as IPv4 (no new flow in from the wan),
//   as a home router's IPv6 firewall does.
// - The rendezvous node binds "::" (every address of both families) and so answers from the
//   address it was asked at only because it reads each datagram's destination (IP_PKTINFO): the
//   internet namespace's route would otherwise pick the address of the link the answer leaves
//   on, which no NAT's conntrack entry and no home's filter lets through.
// - `udpBlocked` homes: the NAT's forward chain drops all UDP to the internet and all TCP but
//   to coturn's port; `signallingHole` keeps UDP to the rendezvous node's port open (the session
//   layer's friend connection is UDP only, so without it no call can be set up at all).
// - The internet namespace's default route leads to a sink namespace (`<p>x`) that drops
//   everything, like the rest of the internet for addresses nobody here holds: a server sending
//   to a home's private address sees its datagram leave and vanish, as on a real network, instead
//   of "network unreachable" (which makes coturn close the relay socket of the allocation that
//   sent it).
// - `killDirectPath()`: the internet's forward chain drops UDP between the two homes' public
//   addresses; the rendezvous node and coturn stay reachable.
// - `renumber(home:)`: a home without NAT moves to another address on its LAN mid-run.
//
// Observations: `relayBytes()` (nft counters in the internet namespace on coturn's relay port
// range, both directions), `turnClientTraffic()` (counters on coturn's UDP and TCP listening
// port), `turnAllocations()` (coturn's log lines for successful allocations), `directPackets()`
// (UDP between the homes' public addresses, each way) and `directPathDrops()` (packets
// `killDirectPath()` dropped).
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// A process the lab started inside a namespace, its output lines collected by a reader thread.
/// Thread rule: any thread (lines behind a lock). Cost: one reader thread per process.
final class LabProcess: @unchecked Sendable {
    let process = Process()
    private let lines = LineBuffer()

    /// Runs `executable` with `arguments` inside network namespace `namespace`; stdout and stderr
    /// both go to `output`.
    init(namespace: String, _ executable: String, _ arguments: [String], cwd: String? = nil) throws {
        // Through `unblockSignalsAndExec`, so that `stop()`'s SIGTERM is not ignored (which
        // would wait for the SIGKILL 2 s later).
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", unblockSignalsAndExec, "/usr/sbin/ip", "netns", "exec", namespace, executable] + arguments
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let handle = pipe.fileHandleForReading
        let buffer = lines
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { buffer.closed.store(true, ordering: .releasing); break }
                pending += chunk
                while let nl = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                    pending = Data(pending[(nl + 1)...])
                    buffer.lines.withLock { $0.append(line) }
                }
            }
        }
    }

    /// Every output line so far.
    var output: [String] { lines.lines.withLock { $0 } }

    /// Waits until a line contains `text`; false after `timeout` seconds or when the process ended.
    func waitForLine(containing text: String, timeout: Double) async -> Bool {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while MonotonicTime.now < deadline {
            if output.contains(where: { $0.contains(text) }) { return true }
            if !process.isRunning { return output.contains(where: { $0.contains(text) }) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// SIGTERM, then SIGKILL after 2 s; waits for the exit.
    func stop() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGTERM)
        let deadline = MonotonicTime.now + .seconds(2)
        while process.isRunning && MonotonicTime.now < deadline { usleep(10_000) }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A lab failed to build: the command that failed and what it printed.
struct NetworkLabError: Error, CustomStringConvertible {
    var description: String
}

/// The lab: namespaces, links, NAT rules, the rendezvous node and coturn. Built by `init`,
/// removed by `teardown()` (also safe after a failed `init`, which tears down itself).
/// Thread rule: one test drives it. Cost: about a dozen `ip`/`nft` commands to build, a second
/// for coturn to start.
final class NetworkLab: @unchecked Sendable {
    /// How a home reaches the internet.
    enum NAT: String, Sendable {
        /// Routed, no translation (the home's LAN is 198.18.<n>.0/24).
        case none
        /// `masquerade`: a port-restricted cone with port preservation.
        case cone
        /// `.cone`, but filtering by address only: a new flow in from an address the home sent
        /// to in the last 2 minutes, from any port, is let in to the home (address-restricted
        /// cone).
        case addressRestricted
        /// `masquerade random`: a new public port per destination.
        case symmetric
    }

    /// What to build.
    struct Options: Sendable {
        /// Home 1's NAT.
        var home1: NAT = .cone
        /// Home 2's NAT (ignored with `sameLAN`).
        var home2: NAT = .cone
        /// Home 2 on home 1's LAN, behind home 1's NAT.
        var sameLAN = false
        /// Homes (1, 2) whose NAT lets no UDP out and TCP only to coturn's port.
        var udpBlocked: Set<Int> = []
        /// With `udpBlocked`: UDP to the rendezvous node's port stays open.
        var signallingHole = true
        /// Homes and their links get only IPv6 (routed, no NAT).
        var ipv6Only = false
        /// Homes (1, 2) that also get IPv6 beside their IPv4 (routed, behind the NAT's filter).
        var dualStackHomes: Set<Int> = []
        /// Start a rendezvous node in the internet namespace.
        var rendezvous = true
        /// Start coturn in the internet namespace.
        var turn = true
        /// The NATs' public addresses and the services on one Ethernet segment (203.0.113.0/24)
        /// instead of routed links into the internet namespace (IPv4 only; not with `sameLAN`).
        var flatSegment = false
        /// With `sameLAN`: the two homes cannot reach each other on the LAN (each drops the
        /// other's address, as a Wi-Fi access point's client isolation does); each home's
        /// ephemeral ports come from its own range (home 1 20000-29999, home 2 30000-39999).
        var lanIsolation = false
        /// With `sameLAN` and a `.cone` NAT: the NAT hairpins, i.e. a home's datagram to the NAT's
        /// public address comes back to the home whose port it names (by the port ranges above),
        /// with the NAT's public address and the sender's port as its source.
        var hairpin = false
        /// coturn on an address of its own (203.0.113.10) instead of the rendezvous node's
        /// (IPv4 only; not with `turnTLS`, whose certificate names the node's address).
        var turnOwnAddress = false
        /// The internet namespace has a default route (to the sink, see the notes at the top).
        /// Without it, as on a flat segment with nothing beyond, a datagram coturn sends to an
        /// address outside the lab's links fails with "network unreachable".
        var servicesDefaultRoute = true
        /// Pair the rendezvous node with coturn by a shared secret, as a deployment does
        /// (docs/turn.md): coturn checks `use-auth-secret` credentials (no static user, with
        /// `user-quota`, `total-quota` and `max-bps`), and the node, given `--turn-url` for UDP and
        /// TCP and `--turn-secret`, hands its registered peers credentials lasting this many
        /// seconds. Nil: coturn's static user `lab`.
        var sharedSecretLifetime: Int? = nil
        /// Lines added to coturn's configuration (e.g. `max-allocate-lifetime=4`).
        var turnExtraConfiguration: [String] = []
        /// coturn also listens for TURN over TLS on `turnTLSPort`, with a certificate for its
        /// address signed by a CA the lab makes (`turnCAFile`).
        var turnTLS = false
    }

    static let rendezvousPort: UInt16 = 33_400
    static let turnPort: UInt16 = 3478
    /// coturn's TLS port with `Options.turnTLS`.
    static let turnTLSPort: UInt16 = 5349
    static let relayPorts: ClosedRange<UInt16> = 49_160...49_200
    static let turnUser = "lab", turnPassword = "labpass", turnRealm = "revue.lab"
    /// coturn's `static-auth-secret` with `sharedSecretLifetime` (the node reads it from a file).
    static let turnSecret = "revue-lab-shared-secret-0123456789"
    /// The quotas coturn applies with `sharedSecretLifetime`: allocations per user (the user
    /// name's id, whatever its expiry), allocations in all, bytes per second per allocation.
    static let turnUserQuota = 12, turnTotalQuota = 1200, turnMaxBps = 3_000_000

    let options: Options
    /// The namespace name prefix (unique per process and lab).
    let prefix: String
    /// A directory for coturn's files and the peers' data directories.
    let directory: String
    private(set) var rendezvous: NodeProcess?
    private(set) var coturn: LabProcess?
    private var torn = false
    private static let serial = Atomic<Int>(0)

    /// The internet namespace (rendezvous node, coturn, routing between the NATs).
    var internet: String { prefix + "i" }
    /// Home `n`'s namespace (1 or 2).
    func home(_ n: Int) -> String { prefix + "h\(n)" }
    /// The namespace of home `n`'s NAT (with `sameLAN`, both homes are behind NAT 1).
    func nat(_ n: Int) -> String { prefix + "n\(options.sameLAN ? 1 : n)" }
    private var namespaces: [String] {
        [internet, prefix + "x", prefix + "n1", home(1), home(2)] + (options.sameLAN ? [] : [prefix + "n2"])
    }

    /// The services' address (rendezvous node and coturn), IPv6 with `ipv6Only`.
    var serviceHost: String { options.ipv6Only ? "2001:db8:ff::1" : "203.0.113.1" }
    /// `host:port` of `port` on the services' address (brackets for IPv6).
    func serviceEndpoint(_ port: UInt16) -> String { options.ipv6Only ? "[\(serviceHost)]:\(port)" : "\(serviceHost):\(port)" }
    /// The rendezvous node as peers name it.
    var rendezvousEndpoint: String { serviceEndpoint(Self.rendezvousPort) }
    /// `--stun` value: coturn answers Binding requests.
    /// coturn's address: the services' address, or its own with `turnOwnAddress`.
    var turnHost: String { options.turnOwnAddress ? Self.turnOwnHost : serviceHost }
    static let turnOwnHost = "203.0.113.10"
    /// coturn's address and `port`.
    func turnEndpoint(_ port: UInt16) -> String { options.ipv6Only ? serviceEndpoint(port) : "\(turnHost):\(port)" }
    var stunArgument: String { turnEndpoint(Self.turnPort) }
    /// `--turn` value for coturn's static user.
    func turnArgument(tcp: Bool = false) -> String {
        "\(Self.turnUser):\(Self.turnPassword)@\(turnEndpoint(Self.turnPort))" + (tcp ? "?transport=tcp" : "")
    }
    /// `--turn` value for coturn's static user over TLS, verified against the lab's CA.
    var turnTLSArgument: String {
        "turns:\(Self.turnUser):\(Self.turnPassword)@\(turnEndpoint(Self.turnTLSPort))?ca=\(turnCAFile)"
    }
    /// The CA that signed coturn's certificate (`Options.turnTLS`).
    var turnCAFile: String { directory + "/coturn/ca.pem" }

    private func natKind(_ n: Int) -> NAT { n == 1 || options.sameLAN ? options.home1 : options.home2 }
    /// Home `n`'s LAN prefix (`a.b.c`), private behind a NAT, routed space without one.
    private func lanPrefix(_ n: Int) -> String {
        let site = options.sameLAN ? 1 : n
        return natKind(n) == .none ? "198.18.\(site)" : "10.0.\(site)"
    }
    /// Home `n`'s IPv6 address beside its IPv4 one (`dualStackHomes`).
    func homeIPv6Address(_ n: Int) -> String { "2001:db8:\(n)::2" }
    /// Home `n`'s own address.
    func homeAddress(_ n: Int) -> String {
        if options.ipv6Only { return "2001:db8:\(options.sameLAN ? 1 : n)::\(options.sameLAN ? n + 1 : 2)" }
        return "\(lanPrefix(n)).\(options.sameLAN ? n + 1 : 2)"
    }
    /// The address home `n`'s traffic has on the internet: its NAT's wan address, or its own
    /// address when nothing translates it.
    func publicAddress(_ n: Int) -> String {
        if options.ipv6Only { return homeAddress(n) }
        if natKind(n) == .none { return homeAddress(n) }
        return wanAddress(options.sameLAN ? 1 : n)
    }
    private func wanAddress(_ site: Int) -> String {
        if options.flatSegment { return "203.0.113.\(site + 1)" }
        return site == 1 ? "192.0.2.2" : "198.51.100.2"
    }
    private func wanRouter(_ site: Int) -> String { site == 1 ? "192.0.2.1" : "198.51.100.1" }

    /// Builds the lab, then starts what `options` asks for; on any failure everything built so
    /// far is removed and the error names the failing step.
    init(_ options: Options = Options()) async throws {
        // At most two labs at a time in this process (LabLease says why).
        await LabLease.shared.acquire()
        self.options = options
        prefix = "rl\(getpid())x\(Self.serial.wrappingAdd(1, ordering: .relaxed).oldValue)"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("revue-lab-\(UUID().uuidString)").path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try run(topologyScript(), "topology")
            try run(natScript(), "NAT rules")
            try run(observationScript(), "counters")
            if !options.udpBlocked.isEmpty { try run(udpBlockScript(), "UDP block") }
            if options.turn { try await startCoturn() }
            if options.rendezvous {
                // Bound to "::": see the rendezvous node in the notes at the top.
                let node = try NodeProcess(
                    ["--rendezvous", "--host", "::", "--port", "\(Self.rendezvousPort)"] + (try turnOfferArguments()),
                    namespace: internet)
                rendezvous = node
                guard await node.wait(timeout: 10, event("ready")) != nil else {
                    throw NetworkLabError(description: "the rendezvous node in \(internet) did not report ready: \(node.events)")
                }
            }
        } catch {
            teardown()
            throw error
        }
    }

    deinit { teardown() }

    /// Runs `script` with `sh -e`; throws with its output when it fails.
    private func run(_ script: String, _ what: String) throws {
        let r = shell("set -e\n" + script)
        guard r.status == 0 else { throw NetworkLabError(description: "lab \(what) failed (\(r.status)): \(r.output)") }
    }

    // MARK: Building

    private func topologyScript() -> String {
        let i = internet, v6 = options.ipv6Only
        // No duplicate address detection: links come up ready (a tentative link-local address
        // made the first IPv6 datagrams across the lab fail neighbour discovery).
        var s =
            namespaces.map {
                "ip netns add \($0)\nip -n \($0) link set lo up\n"
                    + "ip netns exec \($0) sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0"
            }.joined(separator: "\n") + "\n"
        // The flat segment: macvlans in bridge mode on one veth in the internet namespace (one
        // for the services, one per NAT), as `sameLAN`'s LAN is built.
        s +=
            options.flatSegment
            ? """
            ip -n \(i) link add seg type veth peer name segpeer
            ip -n \(i) link set seg up
            ip -n \(i) link set segpeer up
            ip -n \(i) link add flat link seg type macvlan mode bridge
            ip -n \(i) link set flat up
            ip -n \(i) addr add 203.0.113.1/24 dev flat
            ip -n \(i) addr add \(Self.turnOwnHost)/24 dev flat

            """ : "ip -n \(i) addr add 203.0.113.1/32 dev lo\nip -n \(i) addr add \(Self.turnOwnHost)/32 dev lo\n"
        s += """
            ip -n \(i) addr add 2001:db8:ff::1/128 dev lo nodad
            ip netns exec \(i) sysctl -qw net.ipv4.ip_forward=1
            ip netns exec \(i) sysctl -qw net.ipv6.conf.all.forwarding=1
            ip link add up0 netns \(i) type veth peer name up1 netns \(prefix)x
            ip -n \(i) link set up0 up
            ip -n \(prefix)x link set up1 up
            ip -n \(i) addr add 100.64.0.1/30 dev up0
            ip -n \(prefix)x addr add 100.64.0.2/30 dev up1
            \(options.servicesDefaultRoute ? "ip -n \(i) route add default via 100.64.0.2" : "true")
            ip netns exec \(prefix)x nft add table inet sink
            ip netns exec \(prefix)x nft add chain inet sink pre '{ type filter hook prerouting priority -300; policy drop; }'

            """
        let sites = options.sameLAN ? [1] : [1, 2]
        for site in sites {
            let n = prefix + "n\(site)"
            if options.flatSegment {
                s += """
                    ip -n \(i) link add w\(site) link seg type macvlan mode bridge
                    ip -n \(i) link set w\(site) netns \(n)
                    ip -n \(n) link set w\(site) name wan
                    ip -n \(n) link set wan up
                    ip netns exec \(n) sysctl -qw net.ipv4.ip_forward=1
                    ip -n \(n) addr add \(wanAddress(site))/24 dev wan
                    ip -n \(n) route add default via 203.0.113.1

                    """
            } else {
                s += """
                    ip link add w\(site) netns \(i) type veth peer name wan netns \(n)
                    ip -n \(i) link set w\(site) up
                    ip -n \(n) link set wan up
                    ip netns exec \(n) sysctl -qw net.ipv4.ip_forward=1
                    ip netns exec \(n) sysctl -qw net.ipv6.conf.all.forwarding=1
                    ip -n \(i) addr add \(wanRouter(site))/24 dev w\(site)
                    ip -n \(n) addr add \(wanAddress(site))/24 dev wan
                    ip -n \(n) route add default via \(wanRouter(site))
                    ip -n \(i) addr add 2001:db8:a\(site)::1/64 dev w\(site) nodad
                    ip -n \(n) addr add 2001:db8:a\(site)::2/64 dev wan nodad
                    ip -n \(n) -6 route add default via 2001:db8:a\(site)::1
                    ip -n \(i) -6 route add 2001:db8:\(site)::/64 via 2001:db8:a\(site)::2

                    """
            }
            if natKind(site) == .none && !v6 {
                s += "ip -n \(i) route add \(lanPrefix(site)).0/24 via \(wanAddress(site))\n"
            }
            // The LAN side: one veth to the home, or, when both homes share it, macvlans in
            // bridge mode (one for the NAT, one per home) on a veth pair inside the NAT
            // namespace: one Ethernet segment, multicast included.
            let homes = options.sameLAN ? [1, 2] : [site]
            if options.sameLAN {
                s += """
                    ip -n \(n) link add seg type veth peer name segpeer
                    ip -n \(n) link set seg up
                    ip -n \(n) link set segpeer up
                    ip -n \(n) link add lan link seg type macvlan mode bridge

                    """
            }
            for h in homes {
                let hn = home(h)
                if options.sameLAN {
                    s += """
                        ip -n \(n) link add m\(h) link seg type macvlan mode bridge
                        ip -n \(n) link set m\(h) netns \(hn)
                        ip -n \(hn) link set m\(h) name eth0

                        """
                } else {
                    s += "ip link add lan netns \(n) type veth peer name eth0 netns \(hn)\n"
                }
                s += "ip -n \(hn) link set eth0 up\n"
                if v6 {
                    s += """
                        ip -n \(hn) addr add \(homeAddress(h))/64 dev eth0 nodad
                        ip -n \(hn) -6 route add default via 2001:db8:\(site)::1

                        """
                } else {
                    s += """
                        ip -n \(hn) addr add \(homeAddress(h))/24 dev eth0
                        ip -n \(hn) route add default via \(lanPrefix(h)).1

                        """
                    if options.dualStackHomes.contains(h) {
                        s += """
                            ip -n \(hn) addr add \(homeIPv6Address(h))/64 dev eth0 nodad
                            ip -n \(hn) -6 route add default via 2001:db8:\(site)::1
                            ip -n \(n) addr add 2001:db8:\(site)::1/64 dev lan nodad

                            """
                    }
                }
            }
            s += "ip -n \(n) link set lan up\n"
            s +=
                v6
                ? "ip -n \(n) addr add 2001:db8:\(site)::1/64 dev lan nodad\n"
                : "ip -n \(n) addr add \(lanPrefix(site)).1/24 dev lan\n"
        }
        return s
    }

    private func natScript() -> String {
        guard !options.ipv6Only else { return "true" }
        var s = ""
        for site in options.sameLAN ? [1] : [1, 2] {
            let kind = natKind(site)
            guard kind != .none else { continue }
            let n = prefix + "n\(site)"
            s += """
                ip netns exec \(n) nft add table ip labnat
                ip netns exec \(n) nft add chain ip labnat post '{ type nat hook postrouting priority srcnat; policy accept; }'
                ip netns exec \(n) nft add rule ip labnat post oifname wan masquerade\(kind == .symmetric ? " random" : "")
                ip netns exec \(n) nft add table inet labfw
                ip netns exec \(n) nft add chain inet labfw in '{ type filter hook input priority filter; policy accept; }'
                ip netns exec \(n) nft add chain inet labfw transit '{ type filter hook forward priority filter; policy accept; }'
                ip netns exec \(n) nft add rule inet labfw in iifname wan ct state new counter drop
                ip netns exec \(n) nft add rule inet labfw transit iifname wan ct state new counter drop

                """
            if kind == .addressRestricted {
                // Remember every address the home sends to (for 2 minutes); a new flow in from one
                // of them goes to the home at the port it arrived at (the home's own port, which
                // the masquerade kept), ahead of the drop of new flows.
                s += """
                    ip netns exec \(n) nft add set ip labnat contacted '{ type ipv4_addr; flags dynamic,timeout; timeout 2m; }'
                    ip netns exec \(n) nft add chain ip labnat seen '{ type filter hook forward priority filter; policy accept; }'
                    ip netns exec \(n) nft add rule ip labnat seen oifname wan update @contacted '{ ip daddr }'
                    ip netns exec \(n) nft add chain ip labnat pre '{ type nat hook prerouting priority dstnat; policy accept; }'
                    ip netns exec \(n) nft add rule ip labnat pre iifname wan ip saddr @contacted meta l4proto udp dnat to \(homeAddress(site))
                    ip netns exec \(n) nft insert rule inet labfw transit iifname wan ct status dnat counter accept

                    """
            }
        }
        if options.sameLAN && (options.lanIsolation || options.hairpin) { s += sharedLANScript() }
        return s.isEmpty ? "true" : s
    }

    /// The ephemeral port range of home `n` on a shared LAN with `lanIsolation` or `hairpin`.
    private func portRange(_ n: Int) -> ClosedRange<Int> { n == 1 ? 20_000...29_999 : 30_000...39_999 }

    /// `lanIsolation` and `hairpin` on a shared LAN (see `Options`).
    private func sharedLANScript() -> String {
        var s = ""
        for h in [1, 2] {
            let hn = home(h), r = portRange(h)
            s += "ip netns exec \(hn) sysctl -qw net.ipv4.ip_local_port_range='\(r.lowerBound) \(r.upperBound)'\n"
            if options.lanIsolation {
                let other = homeAddress(3 - h)
                s += """
                    ip netns exec \(hn) nft add table inet labiso
                    ip netns exec \(hn) nft add chain inet labiso in '{ type filter hook input priority 0; policy accept; }'
                    ip netns exec \(hn) nft add chain inet labiso out '{ type filter hook output priority 0; policy accept; }'
                    ip netns exec \(hn) nft add rule inet labiso in ip saddr \(other) counter drop
                    ip netns exec \(hn) nft add rule inet labiso out ip daddr \(other) counter drop

                    """
            }
        }
        if options.hairpin {
            let n = prefix + "n1", wan = wanAddress(1)
            s += """
                ip netns exec \(n) nft add chain ip labnat hairpin '{ type nat hook prerouting priority dstnat; policy accept; }'
                ip netns exec \(n) nft add rule ip labnat hairpin iifname lan ip daddr \(wan) udp dport \(portRange(1).lowerBound)-\(portRange(1).upperBound) dnat to \(homeAddress(1))
                ip netns exec \(n) nft add rule ip labnat hairpin iifname lan ip daddr \(wan) udp dport \(portRange(2).lowerBound)-\(portRange(2).upperBound) dnat to \(homeAddress(2))
                ip netns exec \(n) nft add rule ip labnat post iifname lan oifname lan ct status dnat snat to \(wan)

                """
        }
        return s
    }

    /// Counters in the internet namespace: coturn's relay ports (both directions), its
    /// listening port (UDP and TCP), and the direct-path drops of `killDirectPath()`.
    private func observationScript() -> String {
        let i = internet, r = "\(Self.relayPorts.lowerBound)-\(Self.relayPorts.upperBound)", t = Self.turnPort
        return """
            ip netns exec \(i) nft add table inet labobs
            ip netns exec \(i) nft add chain inet labobs in '{ type filter hook input priority -10; policy accept; }'
            ip netns exec \(i) nft add chain inet labobs out '{ type filter hook output priority -10; policy accept; }'
            ip netns exec \(i) nft add chain inet labobs transit '{ type filter hook forward priority 0; policy accept; }'
            ip netns exec \(i) nft add rule inet labobs in udp dport \(r) counter comment '"relay-in"'
            ip netns exec \(i) nft add rule inet labobs out udp sport \(r) counter comment '"relay-out"'
            ip netns exec \(i) nft add rule inet labobs in udp dport \(t) counter comment '"turn-udp"'
            ip netns exec \(i) nft add rule inet labobs in tcp dport \(t) counter comment '"turn-tcp"'
            ip netns exec \(i) nft add rule inet labobs in tcp dport \(Self.turnTLSPort) counter comment '"turn-tls"'
            \(directCounterRules())
            """
    }

    /// Counters of UDP between the two homes' public addresses, each way (none on one LAN).
    private func directCounterRules() -> String {
        guard !options.sameLAN else { return "" }
        let a = publicAddress(1), b = publicAddress(2), family = options.ipv6Only ? "ip6" : "ip"
        var s = ""
        if options.flatSegment {
            // Nothing between the NATs crosses the internet namespace: each NAT counts what it
            // sends to the other.
            for (site, to) in [(1, b), (2, a)] {
                let n = prefix + "n\(site)"
                s += """
                    ip netns exec \(n) nft add table inet labobs
                    ip netns exec \(n) nft add chain inet labobs transit '{ type filter hook postrouting priority 0; policy accept; }'
                    ip netns exec \(n) nft add rule inet labobs transit oifname wan ip daddr \(to) meta l4proto udp counter comment '"direct-\(site)to\(3 - site)"'

                    """
            }
        } else {
            s += """
                ip netns exec \(internet) nft add rule inet labobs transit \(family) saddr \(a) \(family) daddr \(b) meta l4proto udp counter comment '"direct-1to2"'
                ip netns exec \(internet) nft add rule inet labobs transit \(family) saddr \(b) \(family) daddr \(a) meta l4proto udp counter comment '"direct-2to1"'

                """
        }
        // And in each home: what of it got through the home's NAT.
        for (h, other) in [(1, b), (2, a)] {
            s += """
                ip netns exec \(home(h)) nft add table inet labobs
                ip netns exec \(home(h)) nft add chain inet labobs in '{ type filter hook input priority -10; policy accept; }'
                ip netns exec \(home(h)) nft add rule inet labobs in \(family) saddr \(other) meta l4proto udp counter comment '"from-other-home"'

                """
        }
        return s
    }

    private func udpBlockScript() -> String {
        var s = ""
        for h in options.udpBlocked.sorted() {
            let n = nat(h)
            let svc = options.ipv6Only ? "ip6 daddr \(serviceHost)" : "ip daddr \(serviceHost)"
            s += """
                ip netns exec \(n) nft add table inet labblock
                ip netns exec \(n) nft add chain inet labblock transit '{ type filter hook forward priority 0; policy accept; }'

                """
            if options.signallingHole {
                s +=
                    "ip netns exec \(n) nft add rule inet labblock transit iifname lan oifname wan \(svc) udp dport \(Self.rendezvousPort) accept\n"
            }
            s += """
                ip netns exec \(n) nft add rule inet labblock transit iifname lan oifname wan meta l4proto udp counter drop comment '"udp-blocked"'
                ip netns exec \(n) nft add rule inet labblock transit iifname lan oifname wan \(svc) tcp dport \(Self.turnPort) accept
                ip netns exec \(n) nft add rule inet labblock transit iifname lan oifname wan meta l4proto tcp counter drop

                """
        }
        return s
    }

    /// The node's `--turn-url`, `--turn-secret` and `--turn-lifetime` with `sharedSecretLifetime`
    /// (the secret written to a file of mode 0600): coturn over UDP and TCP, or with `turnTLS`
    /// over TLS only; none without.
    private func turnOfferArguments() throws -> [String] {
        guard let lifetime = options.sharedSecretLifetime else { return [] }
        let file = directory + "/turn-secret"
        try (Self.turnSecret + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        let server = turnEndpoint(Self.turnPort)
        // With `turnTLS` the node offers coturn's TLS port alone, so media can only go that way.
        let urls =
            options.turnTLS
            ? ["turns:\(turnEndpoint(Self.turnTLSPort))"] : ["turn:\(server)", "turn:\(server)?transport=tcp"]
        return urls.flatMap { ["--turn-url", $0] } + ["--turn-secret", file, "--turn-lifetime", "\(lifetime)"]
    }

    /// coturn's authentication lines: the static user, or with `sharedSecretLifetime` the shared
    /// secret and the quotas.
    private var turnAuthConfiguration: String {
        guard options.sharedSecretLifetime != nil else { return "lt-cred-mech\nuser=\(Self.turnUser):\(Self.turnPassword)" }
        return [
            "use-auth-secret", "static-auth-secret=\(Self.turnSecret)", "user-quota=\(Self.turnUserQuota)",
            "total-quota=\(Self.turnTotalQuota)", "max-bps=\(Self.turnMaxBps)",
        ].joined(separator: "\n")
    }

    /// coturn's TLS lines: with `Options.turnTLS`, a CA and a certificate for coturn's IPv4
    /// address made with `openssl` in `dir`, and the TLS listener; else `no-tls`.
    private func turnTLSConfiguration(dir: String) throws -> String {
        guard options.turnTLS else { return "no-tls" }
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        let r = shell(
            """
            set -e
            cd '\(dir)'
            printf 'subjectAltName=IP:203.0.113.1\\n' > san.cnf
            openssl req -x509 \(ec) -keyout ca.key -out ca.pem -days 2 -subj /CN=revue-lab-ca 2>&1
            openssl req \(ec) -keyout turn.key -out turn.csr -subj /CN=turn.revue.lab 2>&1
            openssl x509 -req -in turn.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out turn.pem -days 2 \\
                -extfile san.cnf 2>&1
            """)
        guard r.status == 0 else {
            throw NetworkLabError(description: "openssl could not make coturn's certificate: \(r.output)")
        }
        return "tls-listening-port=\(Self.turnTLSPort)\ncert=\(dir)/turn.pem\npkey=\(dir)/turn.key"
    }

    private func startCoturn() async throws {
        let dir = directory + "/coturn"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ips = options.ipv6Only ? ["203.0.113.1", "2001:db8:ff::1"] : [turnHost]
        let config =
            ips.map { "listening-ip=\($0)\nrelay-ip=\($0)" }.joined(separator: "\n") + """

                listening-port=\(Self.turnPort)
                min-port=\(Self.relayPorts.lowerBound)
                max-port=\(Self.relayPorts.upperBound)
                realm=\(Self.turnRealm)
                \(turnAuthConfiguration)
                fingerprint
                \(try turnTLSConfiguration(dir: dir))
                no-dtls
                no-cli
                no-tcp-relay
                no-multicast-peers
                log-file=\(dir)/turn.log
                simple-log
                verbose
                pidfile=\(dir)/turnserver.pid
                userdb=\(dir)/turndb

                """ + options.turnExtraConfiguration.map { $0 + "\n" }.joined()
        try config.write(toFile: dir + "/turnserver.conf", atomically: true, encoding: .utf8)
        let p = try LabProcess(namespace: internet, "turnserver", ["-c", dir + "/turnserver.conf"], cwd: dir)
        coturn = p
        // coturn logs its listeners as it opens them; wait for the TCP one on our address.
        guard await waitForTURNListening(timeout: 10) else {
            throw NetworkLabError(
                description: "coturn did not start listening in \(internet): \(p.output.suffix(30).joined(separator: "\n"))")
        }
    }

    /// True once something listens on coturn's TCP port in the internet namespace.
    private func waitForTURNListening(timeout: Double) async -> Bool {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while MonotonicTime.now < deadline {
            let r = shell(
                "ip netns exec \(internet) ss -Htln 'sport = :\(Self.turnPort)'; ip netns exec \(internet) ss -Huln 'sport = :\(Self.turnPort)'"
            )
            if r.output.split(separator: "\n").count >= 2 { return true }
            if coturn?.process.isRunning == false { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    // MARK: Actions

    /// Drops UDP between the two homes' public addresses in the internet's forward chain (the
    /// relay and the rendezvous node stay reachable). No effect on `sameLAN` homes.
    func killDirectPath() throws {
        let a = publicAddress(1), b = publicAddress(2)
        let family = options.ipv6Only ? "ip6" : "ip"
        if options.flatSegment {
            try run(
                """
                ip netns exec \(prefix)n1 nft add rule inet labobs transit oifname wan ip daddr \(b) meta l4proto udp counter drop comment '"direct-cut"'
                ip netns exec \(prefix)n2 nft add rule inet labobs transit oifname wan ip daddr \(a) meta l4proto udp counter drop comment '"direct-cut"'
                """, "kill direct path")
            return
        }
        try run(
            """
            ip netns exec \(internet) nft add rule inet labobs transit \(family) saddr \(a) \(family) daddr \(b) meta l4proto udp counter drop comment '"direct-cut"'
            ip netns exec \(internet) nft add rule inet labobs transit \(family) saddr \(b) \(family) daddr \(a) meta l4proto udp counter drop comment '"direct-cut"'
            """, "kill direct path")
    }

    /// Gives home `n` (IPv4, NAT `.none`) a second address on its LAN (.13), after its first, so
    /// the kernel keeps choosing the first as the source of what the home sends; then makes the
    /// first unreachable from the other home (the internet drops UDP from home `3 - n` to it), as
    /// a host whose main address is firewalled and whose alias is not. Returns the second address.
    @discardableResult
    func addReachableAlias(home n: Int) throws -> String {
        let h = home(n), first = homeAddress(n), alias = "\(lanPrefix(n)).13", other = publicAddress(3 - n)
        try run(
            """
            ip -n \(h) addr add \(alias)/24 dev eth0
            ip netns exec \(internet) nft add rule inet labobs transit ip saddr \(other) ip daddr \(first) meta l4proto udp counter drop comment '"alias-only"'
            """, "alias for home \(n)")
        return alias
    }

    /// Moves home `n` (IPv4, NAT `.none`) to another address on its LAN, the way a laptop that
    /// changes networks gets a new one: the new address is added, the old one removed (the new
    /// one promoted so the LAN route stays), the default route set again. Returns the new address.
    @discardableResult
    func renumber(home n: Int) throws -> String {
        let h = home(n), old = homeAddress(n), new = "\(lanPrefix(n)).\(options.sameLAN ? n + 11 : 12)"
        try run(
            """
            ip netns exec \(h) sysctl -qw net.ipv4.conf.eth0.promote_secondaries=1
            ip -n \(h) addr add \(new)/24 dev eth0
            ip -n \(h) addr del \(old)/24 dev eth0
            ip -n \(h) route replace default via \(lanPrefix(n)).1
            """, "renumber home \(n)")
        return new
    }

    /// Cuts home `n`'s link: its namespace drops everything in and out on `eth0`.
    func cutLink(home n: Int) throws {
        let h = home(n)
        try run(
            """
            ip netns exec \(h) nft add table inet labcut
            ip netns exec \(h) nft add chain inet labcut in '{ type filter hook input priority 0; policy accept; }'
            ip netns exec \(h) nft add chain inet labcut out '{ type filter hook output priority 0; policy accept; }'
            ip netns exec \(h) nft add rule inet labcut in iifname eth0 drop
            ip netns exec \(h) nft add rule inet labcut out oifname eth0 drop
            """, "cut link")
    }

    /// Undoes `cutLink(home:)`.
    func restoreLink(home n: Int) throws {
        try run("ip netns exec \(home(n)) nft delete table inet labcut", "restore link")
    }

    // MARK: Observations

    /// Per rule comment, the packets and bytes its counter saw, from `nft -j` in `namespace`.
    func counters(in namespace: String, table: String) -> [String: (packets: Int, bytes: Int)] {
        let r = shell("ip netns exec \(namespace) nft -j list table inet \(table)")
        guard r.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(r.output.utf8)) as? [String: Any],
            let items = json["nftables"] as? [[String: Any]]
        else { return [:] }
        var out: [String: (packets: Int, bytes: Int)] = [:]
        for item in items {
            guard let rule = item["rule"] as? [String: Any], let comment = rule["comment"] as? String,
                let exprs = rule["expr"] as? [[String: Any]]
            else { continue }
            for e in exprs {
                if let c = e["counter"] as? [String: Any] {
                    let old = out[comment] ?? (0, 0)
                    out[comment] = (old.packets + (c["packets"] as? Int ?? 0), old.bytes + (c["bytes"] as? Int ?? 0))
                }
            }
        }
        return out
    }

    /// Bytes through coturn's relay ports so far (peer side, both directions).
    func relayBytes() -> Int {
        let c = counters(in: internet, table: "labobs")
        return (c["relay-in"]?.bytes ?? 0) + (c["relay-out"]?.bytes ?? 0)
    }

    /// Packets clients sent to coturn's listening port so far, over UDP and over TCP.
    func turnClientTraffic() -> (udp: Int, tcp: Int, tls: Int) {
        let c = counters(in: internet, table: "labobs")
        return (c["turn-udp"]?.packets ?? 0, c["turn-tcp"]?.packets ?? 0, c["turn-tls"]?.packets ?? 0)
    }

    /// UDP packets between the homes' public addresses that crossed the internet, each way
    /// (counted before `killDirectPath()`'s drop rules, so dropped ones count too).
    func directPackets() -> (oneToTwo: Int, twoToOne: Int) {
        guard options.flatSegment else {
            let c = counters(in: internet, table: "labobs")
            return (c["direct-1to2"]?.packets ?? 0, c["direct-2to1"]?.packets ?? 0)
        }
        return (
            counters(in: prefix + "n1", table: "labobs")["direct-1to2"]?.packets ?? 0,
            counters(in: prefix + "n2", table: "labobs")["direct-2to1"]?.packets ?? 0
        )
    }

    /// UDP packets from the other home's public address that reached home `n` (through its NAT).
    func directPacketsArrived(home n: Int) -> Int {
        counters(in: home(n), table: "labobs")["from-other-home"]?.packets ?? 0
    }

    /// Packets `killDirectPath()` dropped so far.
    func directPathDrops() -> Int {
        guard options.flatSegment else { return counters(in: internet, table: "labobs")["direct-cut"]?.packets ?? 0 }
        return [1, 2].reduce(0) { $0 + (counters(in: prefix + "n\($1)", table: "labobs")["direct-cut"]?.packets ?? 0) }
    }

    /// UDP packets home `n`'s NAT refused to let out (with `udpBlocked`).
    func blockedUDP(home n: Int) -> Int { counters(in: nat(n), table: "labblock")["udp-blocked"]?.packets ?? 0 }

    /// coturn's log lines for allocations it granted.
    func turnAllocations() -> [String] {
        turnLog.filter { $0.contains("ALLOCATE processed, success") }
    }

    /// coturn's whole log so far (its log file, written as it goes; what it printed before
    /// opening the file comes from its output).
    var turnLog: [String] { (coturn?.output ?? []) + turnFileLog }

    /// coturn's log file so far (what it logs once the file is open; no copy of its output).
    var turnFileLog: [String] {
        let file = (try? String(contentsOfFile: directory + "/coturn/turn.log", encoding: .utf8)) ?? ""
        return file.split(separator: "\n").map(String.init)
    }

    // MARK: Probing the NATs

    /// Runs `body` on a new thread that joined network namespace `namespace` (sockets made there
    /// stay in it). Blocks the caller until `body` returns.
    func inNamespace<T: Sendable>(_ namespace: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
        let outcome = LabOutcome<T>()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let fd = open("/run/netns/\(namespace)", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                outcome.result = .failure(NetworkLabError(description: "open /run/netns/\(namespace): errno \(errno)"))
                return
            }
            defer { close(fd) }
            let cloneNewNet: Int32 = 0x4000_0000  // CLONE_NEWNET
            guard labSetns(fd, cloneNewNet) == 0 else {
                outcome.result = .failure(NetworkLabError(description: "setns \(namespace): errno \(errno)"))
                return
            }
            outcome.result = Result { try body() }
        }
        thread.start()
        done.wait()
        return try outcome.result!.get()
    }

    /// Sends from one UDP socket in home `n` to `destinations` distinct ports on the services'
    /// address and returns the socket's own address and the source each destination saw: the
    /// NAT's mapping per destination. Also reports whether a packet from a port the home never
    /// sent to got in (filtering).
    func probeMapping(home n: Int, destinations: Int = 3) throws -> (
        local: SocketAddress, mapped: [SocketAddress], unsolicitedArrived: Bool
    ) {
        let family: SocketAddress.Family = options.ipv6Only ? .ipv6 : .ipv4
        let any: SocketAddress = family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0)
        let service = serviceHost
        let receivers = try inNamespace(internet) {
            try (0...destinations).map { _ in try UDPSocket(bindingTo: SocketAddress(host: service, port: 0)) }
        }
        let sender = try inNamespace(home(n)) { try UDPSocket(bindingTo: any) }
        defer {
            sender.close()
            for receiver in receivers { receiver.close() }
        }
        var mapped: [SocketAddress] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        for r in receivers.dropLast() {
            let to = try r.localAddress()
            var seen: SocketAddress?
            for _ in 0..<5 where seen == nil {
                _ = try [UInt8]("probe".utf8).withUnsafeBytes { try sender.send($0, to: to) }
                if try r.waitUntilReadable(timeoutMilliseconds: 200) {
                    seen = try buffer.withUnsafeMutableBytes { try r.receive(into: $0).source }
                }
            }
            guard let seen else { throw NetworkLabError(description: "probe to \(to) from \(home(n)) never arrived") }
            mapped.append(seen)
        }
        // The last receiver never heard from the home: does the NAT let its packet in?
        let stranger = receivers.last!
        for m in Set(mapped) { _ = try [UInt8]("unsolicited".utf8).withUnsafeBytes { try stranger.send($0, to: m) } }
        let arrived = try sender.waitUntilReadable(timeoutMilliseconds: 300)
        return (try sender.localAddress(), mapped, arrived)
    }

    // MARK: Peers

    /// Starts a revue-node peer in home `n` with its data under the lab's directory, registered
    /// with the lab's rendezvous node, plus `arguments`.
    func peer(home n: Int, name: String, _ arguments: [String] = []) throws -> NodeProcess {
        // With `turnTLS`, the lab's CA stands in for the system's CA store (OpenSSL reads
        // SSL_CERT_FILE for it), as a public CA would for a deployed coturn.
        try NodeProcess(
            ["--data", directory + "/" + name, "--name", name, "--rendezvous", rendezvousEndpoint] + arguments,
            namespace: home(n),
            environment: options.turnTLS ? ["SSL_CERT_FILE": turnCAFile] : [:])
    }

    // MARK: Teardown

    /// Stops coturn and the rendezvous node, deletes every namespace (and with them links and
    /// rules) and the lab's directory. Idempotent. Peers the test started must be killed first
    /// (a namespace with a live process lingers until it exits).
    func teardown() {
        guard !torn else { return }
        torn = true
        coturn?.stop()
        rendezvous?.kill()
        shell(namespaces.map { "ip netns del \($0) 2>/dev/null" }.joined(separator: "; ") + "; true")
        try? FileManager.default.removeItem(atPath: directory)
        Task { await LabLease.shared.release() }
    }
}

/// The right to build a lab: held from `NetworkLab.init` to `teardown()`, by at most
/// `capacity` labs at once, waiters served in order. A lab's peers and coturn use about a quarter
/// of a core (their media is small and the scenarios mostly wait on the clock), so two labs share
/// a 2-core machine without starving each other; more would crowd the failover timings.
/// Thread rule: an actor. Cost: none while a place is free.
actor LabLease {
    static let shared = LabLease(capacity: 2)
    private let capacity: Int
    private var holders = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(capacity: Int) { self.capacity = capacity }

    /// Waits until fewer than `capacity` labs exist, then holds a place.
    func acquire() async {
        guard holders >= capacity else { holders += 1; return }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Passes the place to the next waiter, or frees it.
    func release() {
        if waiters.isEmpty { holders -= 1 } else { waiters.removeFirst().resume() }
    }
}

/// What a body run on another thread gave: set by that thread before it signals, read after.
private final class LabOutcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// setns(2): moves the calling thread into the namespace `fd` refers to.
@_silgen_name("setns")
private func labSetns(_ fd: Int32, _ nstype: Int32) -> Int32

/// True when this process may build labs: root, with ip, nft and a built revue-node.
let networkLabAvailable =
    getuid() == 0 && NodeProcess.binary != nil
    && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft")
    && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")

/// True when coturn's `turnserver` is installed as well.
let networkLabHasTURN =
    networkLabAvailable
    && ["/usr/bin/turnserver", "/usr/local/bin/turnserver"].contains {
        FileManager.default.isExecutableFile(atPath: $0)
    }
